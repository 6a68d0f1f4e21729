"""The self-checks of docs/math.md#self-checks for FLUX through the real rollout backend, samplers and update engine.

1. On-policy ratio: re-scoring the stored rollout steps with unchanged weights gives ratio 1 to 1e-6 in float32
   for flow_sde and cps, with distilled guidance alone (cfg 1: one call per step) and with classic CFG on top
   (cfg 4: a positive and a negative call), in chunks and micro-batches that mix prompts.
2. A full ODE rollout through the backend equals FluxPipeline's own output for the same seed, prompt, steps and
   guidance, to 1/255 in pixels.
3. FLUX.1-schnell's layout (no guidance embedding, no shift) does both on its 4-step schedule.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from flux_helpers import build_model, load_pipe, pipe_sample
from omni_rl_flux.latents import pack

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


@pytest.mark.parametrize("sampler_name", ["flow_sde", "cps"])
@pytest.mark.parametrize("cfg", [1.0, 4.0], ids=["distilled_guidance", "classic_cfg"])
def test_on_policy_ratio_is_one(flux_model, sampler_name: str, cfg: float) -> None:
    assert flux_model.guidance == 3.5  # the dev-like tiny pipeline: the embedding is in every call
    sampler = build("sampler", sampler_name, {"window_size": 3, "window_range": [0, 4]})
    batch = _rollout(flux_model, sampler, cfg)
    assert batch.trajectory is not None and batch.trajectory.log_probs.shape == (4, 3)
    assert ("negative_prompt_embeds" in batch.conditioning.tensors) == (cfg > 1)
    loss = build("loss", "flow_grpo", {})
    params = list(flux_model.trainable_parameters())
    engine = TrajectoryUpdate(flux_model, sampler, loss, torch.optim.AdamW(params), OptimConfig(micro_batch=3))
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    ratio = torch.exp(recomputed - batch.trajectory.log_probs)
    assert torch.max(torch.abs(ratio - 1)).item() < 1e-6


@pytest.mark.parametrize("cfg", [1.0, 4.0], ids=["distilled_guidance", "classic_cfg"])
def test_ode_rollout_equals_the_pipeline(flux_model, base_pipe, cfg: float) -> None:
    batch = _rollout(flux_model, build("sampler", "ode", {}), cfg, steps=4, mode="eval")
    for k in (0, 2):
        latents, images = pipe_sample(base_pipe, PROMPTS[k], steps=4, cfg=cfg, seed=SEEDS[k])
        torch.testing.assert_close(pack(batch.final_latents[k : k + 1]), latents, rtol=0, atol=1e-5)
        assert (batch.images[k].int() - images[0].int()).abs().max() <= 1


def test_schnell_trains_and_validates_on_its_four_step_schedule(tiny_schnell_path) -> None:
    """No guidance embedding, no shift: a train rollout re-scores to ratio 1 and a validation rollout is the
    pipeline's own 4-step sample."""
    model = build_model(tiny_schnell_path, max_sequence_length=256)
    sampler = build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 3]})
    batch = _rollout(model, sampler, 1.0)
    loss = build("loss", "flow_grpo", {})
    engine = TrajectoryUpdate(
        model, sampler, loss, torch.optim.AdamW(list(model.trainable_parameters())), OptimConfig(micro_batch=3)
    )
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    assert torch.max(torch.abs(torch.exp(recomputed - batch.trajectory.log_probs) - 1)).item() < 1e-6
    validation = _rollout(model, build("sampler", "ode", {}), 1.0, steps=4, mode="eval")
    pipe = load_pipe(tiny_schnell_path)
    expected = pipe(
        PROMPTS[2],
        guidance_scale=0.0,
        num_inference_steps=4,
        max_sequence_length=256,
        generator=torch.Generator().manual_seed(SEEDS[2]),
        height=32,
        width=32,
        output_type="latent",
    ).images
    torch.testing.assert_close(pack(validation.final_latents[2:3]), expected, rtol=0, atol=1e-5)
