"""The self-checks of docs/math.md#self-checks for ``z_image`` through the real ``diffusers`` rollout backend,
samplers and update engine.

1. A full ODE rollout equals ``ZImagePipeline.__call__`` for the same prompt, seed, steps, size and guidance within
   1 level on the decoded pixels: the base (dynamically shifted) schedule with and without CFG, and the Turbo
   schedule (fixed shift 3, few steps, no CFG).
2. On-policy ratio: re-scoring the stored rollout steps with unchanged weights gives ratio 1, and the first
   Flow-GRPO update's mean ratio is 1.
3. The LoRA ``save_lora`` writes loads with ``ZImagePipeline.load_lora_weights`` and changes its output.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from omni_rl_pipelines.testing import first_update_ratio
from z_image_helpers import SIZE, build_model, load_pipe, pipe_sample

from omni_rl import build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest

PROMPTS = ["a red cat", "a red cat", "two blue squares on a green background", "two blue squares on a green background"]
SEEDS = [11, 12, 13, 14]


def _rollout(model: Any, sampler: Any, cfg: float, *, mode: str, steps: int = 4) -> Any:
    options = {"group_size": 2, "steps": steps, "eval_steps": steps, "height": SIZE, "width": SIZE, "cfg": cfg}
    backend = build("rollout", "diffusers", {**options, "batch_size": 3})
    request = RolloutRequest(prompts=PROMPTS, group_ids=[0, 0, 1, 1], seeds=SEEDS, step=1, mode=mode, run_seed=0)
    return backend.generate(model, sampler, request)


@pytest.mark.parametrize("cfg", [0.0, 3.0], ids=["no_cfg", "cfg"])
def test_ode_rollout_equals_the_pipeline_base_schedule(z_model, tiny_z_path: Path, cfg: float) -> None:
    batch = _rollout(z_model, build("sampler", "ode", {}), cfg, mode="eval")
    pipe = load_pipe(tiny_z_path)
    for k in (0, 3):
        images = pipe_sample(pipe, PROMPTS[k], steps=4, guidance=cfg, seed=SEEDS[k])
        assert (batch.images[k].int() - images[0].int()).abs().max() <= 1


def test_ode_rollout_equals_the_pipeline_turbo_schedule(tiny_turbo_path: Path) -> None:
    model = build_model(tiny_turbo_path)
    sigmas = model.sigma_schedule(3, SIZE, SIZE)
    # the fixed shift 3: sigma' = 3 s / (1 + 2 s) over linspace(1, 1/3, 3), then 0
    s = torch.tensor([1.0, 2 / 3, 1 / 3])
    torch.testing.assert_close(sigmas, torch.cat([3 * s / (1 + 2 * s), torch.zeros(1)]))
    batch = _rollout(model, build("sampler", "ode", {}), 0.0, mode="eval", steps=3)
    pipe = load_pipe(tiny_turbo_path)
    for k in (1, 2):
        images = pipe_sample(pipe, PROMPTS[k], steps=3, guidance=0.0, seed=SEEDS[k])
        assert (batch.images[k].int() - images[0].int()).abs().max() <= 1


@pytest.mark.parametrize("cfg", [0.0, 3.0], ids=["no_cfg", "cfg"])
def test_on_policy_ratio_is_one(z_model, cfg: float) -> None:
    sampler = build("sampler", "flow_sde", {"noise_level": 0.9, "window_size": 2, "window_range": [0, 3]})
    batch = _rollout(z_model, sampler, cfg, mode="train")
    assert batch.trajectory is not None
    params = list(z_model.trainable_parameters())
    loss = build("loss", "flow_grpo", {})
    engine = TrajectoryUpdate(z_model, sampler, loss, torch.optim.AdamW(params), OptimConfig(micro_batch=3))
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    assert torch.max(torch.abs(torch.exp(recomputed - batch.trajectory.log_probs) - 1)).item() < 1e-5
    ratio, _ = first_update_ratio(z_model, sampler, batch)
    assert abs(ratio - 1.0) < 1e-5


def test_saved_lora_loads_with_the_pipelines_load_lora_weights(tiny_z_path: Path, tmp_path: Path) -> None:
    model = build_model(tiny_z_path, lora_alpha=8.0)
    with torch.no_grad():
        generator = torch.Generator().manual_seed(3)
        for p in model.trainable_parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    model.save_lora(tmp_path / "lora")
    assert (tmp_path / "lora" / "pytorch_lora_weights.safetensors").is_file()
    pipe = load_pipe(tiny_z_path)
    before = pipe_sample(pipe, PROMPTS[0], steps=2, guidance=0.0, seed=1)
    pipe.load_lora_weights(tmp_path / "lora")
    after = pipe_sample(pipe, PROMPTS[0], steps=2, guidance=0.0, seed=1)
    assert (after.int() - before.int()).abs().max() > 1
    # and the loaded pipeline is this policy: the model's own Euler loop gives the same pixels
    conditioning = model.encode_prompts([PROMPTS[0]], guidance_scale=0.0)
    sigmas = model.sigma_schedule(2, SIZE, SIZE)
    x = torch.randn((1, *model.latent_shape(SIZE, SIZE)), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        for i in range(2):
            x = x + model.predict_velocity(x, sigmas[i].expand(1), conditioning, 0.0) * (sigmas[i + 1] - sigmas[i])
    assert (model.decode(x).int() - after.int()).abs().max() <= 1
