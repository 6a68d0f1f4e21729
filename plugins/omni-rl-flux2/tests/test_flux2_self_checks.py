"""The self-checks of docs/math.md#self-checks for FLUX.2-klein through the real rollout backend, samplers and
update engine, on a base and a step-distilled tiny pipeline.

1. On-policy ratio: re-scoring the stored rollout steps with unchanged weights gives ratio 1 to 1e-6 in float32,
   without CFG and with CFG (base), in chunks and micro-batches that mix prompts.
2. A full ODE rollout through the backend equals Flux2KleinPipeline's own output for the same seed, prompt, steps
   and guidance scale, to 1/255 in pixels; on the distilled variant the guidance scale changes nothing (the
   pipeline ignores it) and costs one transformer call per step.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from flux2_helpers import SEQ, build_model, load_pipe, pipe_images

from omni_rl import build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest

PROMPTS = ["a dog", "a dog", 'a red cat holding a sign that says "hi"', 'a red cat holding a sign that says "hi"']
SEEDS = [11, 12, 13, 14]


def _rollout(model: Any, sampler: Any, cfg: float, steps: int = 4, mode: str = "train") -> Any:
    backend = build(
        "rollout",
        "diffusers",
        {"group_size": 2, "steps": steps, "eval_steps": steps, "height": 32, "width": 32, "cfg": cfg, "batch_size": 3},
    )
    request = RolloutRequest(prompts=PROMPTS, group_ids=[0, 0, 1, 1], seeds=SEEDS, step=1, mode=mode, run_seed=0)
    return backend.generate(model, sampler, request)


def _max_ratio_error(model: Any, sampler: Any, batch: Any) -> float:
    loss = build("loss", "flow_grpo", {})
    params = list(model.trainable_parameters())
    engine = TrajectoryUpdate(model, sampler, loss, torch.optim.AdamW(params), OptimConfig(micro_batch=3))
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    return torch.max(torch.abs(torch.exp(recomputed - batch.trajectory.log_probs) - 1)).item()


@pytest.mark.parametrize("cfg", [1.0, 4.0], ids=["no_cfg", "cfg"])
def test_on_policy_ratio_is_one(base_model, cfg: float) -> None:
    sampler = build("sampler", "flow_sde", {"window_size": 3, "window_range": [0, 4]})
    batch = _rollout(base_model, sampler, cfg)
    assert batch.trajectory is not None and batch.trajectory.log_probs.shape == (4, 3)
    assert ("negative_prompt_embeds" in batch.conditioning.tensors) == (cfg > 1)
    assert _max_ratio_error(base_model, sampler, batch) < 1e-6


@pytest.mark.parametrize("cfg", [1.0, 4.0], ids=["no_cfg", "cfg"])
def test_ode_rollout_equals_the_base_pipeline(base_model, tiny_base_path, cfg: float) -> None:
    batch = _rollout(base_model, build("sampler", "ode", {}), cfg, steps=4, mode="eval")
    pipe = load_pipe(tiny_base_path)
    for k in (0, 2):
        images = pipe_images(pipe, PROMPTS[k], steps=4, cfg=cfg, seed=SEEDS[k])
        assert (batch.images[k].int() - images[0].int()).abs().max() <= 1


def test_distilled_variant_ignores_cfg_and_equals_its_pipeline(tiny_distilled_path) -> None:
    model = build_model(tiny_distilled_path)
    assert model.is_distilled
    sampler = build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 3]})
    batch = _rollout(model, sampler, 4.0)
    assert "negative_prompt_embeds" not in batch.conditioning.tensors
    assert _max_ratio_error(model, sampler, batch) < 1e-6
    calls = model.transformer_calls
    validation = _rollout(model, build("sampler", "ode", {}), 4.0, steps=4, mode="eval")
    assert model.transformer_calls - calls == 4 * 2  # 4 steps x 2 chunks of at most 3 samples, one call each
    pipe = load_pipe(tiny_distilled_path)
    for k in (1, 3):
        images = pipe_images(pipe, PROMPTS[k], steps=4, cfg=4.0, seed=SEEDS[k])
        assert (validation.images[k].int() - images[0].int()).abs().max() <= 1
    assert model.config.max_sequence_length == SEQ
