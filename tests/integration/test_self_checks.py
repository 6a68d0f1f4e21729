"""The self-checks of docs/math.md#self-checks through the real rollout backend, samplers and SD3 model.

1. On-policy ratio: re-scoring the stored rollout steps with unchanged weights (the update's own
   old-log-prob path) gives ratio 1 to 1e-6 in float32, for flow_sde, cps and dance_sde, CFG on and off, for
   MixGRPO-Flash rollouts (DPM-Solver++(2M) outside a progressive window), and for DanceGRPO's timestep_fraction
   (the worker keeps each sample's own subset of the window's columns).
2. A full ODE rollout equals StableDiffusion3Pipeline's own output for the same seed, prompt and steps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from omni_rl import build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest

PROMPTS = ["a red circle", "a red circle", "two blue squares", "two blue squares"]
SEEDS = [11, 12, 13, 14]


@pytest.fixture(scope="module")
def model(tiny_sd3: Path):
    return build("model", "sd3", {"path": str(tiny_sd3), "lora_rank": 4})


def _rollout(model, sampler, cfg: float, steps: int = 4, mode: str = "train"):
    backend = build(
        "rollout",
        "diffusers",
        {"group_size": 2, "steps": steps, "eval_steps": steps, "height": 32, "width": 32, "cfg": cfg, "batch_size": 3},
    )
    request = RolloutRequest(prompts=PROMPTS, group_ids=[0, 0, 1, 1], seeds=SEEDS, step=1, mode=mode, run_seed=0)
    return backend.generate(model, sampler, request)


@pytest.mark.parametrize("sampler_name", ["flow_sde", "cps", "dance_sde"])
@pytest.mark.parametrize("cfg", [1.0, 4.5])
def test_on_policy_ratio_is_one(model, sampler_name: str, cfg: float) -> None:
    sampler = build("sampler", sampler_name, {"window_size": 3, "window_range": [0, 4]})
    batch = _rollout(model, sampler, cfg)
    assert batch.trajectory is not None and batch.trajectory.log_probs.shape == (4, 3)
    loss = build("loss", "flow_grpo", {})
    params = list(model.trainable_parameters())
    engine = TrajectoryUpdate(model, sampler, loss, torch.optim.AdamW(params), OptimConfig(micro_batch=3))
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    ratio = torch.exp(recomputed - batch.trajectory.log_probs)
    assert torch.max(torch.abs(ratio - 1)).item() < 1e-6


@pytest.mark.parametrize("cfg", [1.0, 4.5])
def test_on_policy_ratio_is_one_for_flash_window_rollouts(model, cfg: float) -> None:
    """MixGRPO-Flash: DPM-Solver++(2M) before and after a progressive window in the middle of an 8-step schedule
    (steps 3-4 at training step 1: steps 2 and 6 are second-order ODE steps); re-scoring the stored window steps
    gives ratio 1, and the Flash rollout did take the second-order path (it differs from the Euler rollout)."""
    options = {"window_size": 2, "window_range": [3, 7], "window_mode": "progressive", "iters_per_group": 10}
    sampler = build("sampler", "flow_sde", {**options, "ode_solver": "dpm_solver_2m"})
    batch = _rollout(model, sampler, cfg, steps=8)
    assert batch.trajectory is not None and batch.trajectory.step_indices[0].tolist() == [3, 4]
    loss = build("loss", "flow_grpo", {})
    params = list(model.trainable_parameters())
    engine = TrajectoryUpdate(model, sampler, loss, torch.optim.AdamW(params), OptimConfig(micro_batch=3))
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    ratio = torch.exp(recomputed - batch.trajectory.log_probs)
    assert torch.max(torch.abs(ratio - 1)).item() < 1e-6
    euler = _rollout(model, build("sampler", "flow_sde", options), cfg, steps=8)
    assert euler.trajectory is not None
    assert not torch.allclose(batch.trajectory.latents[:, 0], euler.trajectory.latents[:, 0], atol=1e-4)
    assert not torch.allclose(batch.final_latents, euler.final_latents, atol=1e-4)


@pytest.mark.parametrize("cfg", [1.0, 4.5])
def test_on_policy_ratio_is_one_on_the_trained_subset_of_the_window(model, cfg: float) -> None:
    """DanceGRPO: dance_sde on every step but the last of 6, each sample training ceil(0.6 * 5) = 3 of them; the
    columns kept per sample re-score to their stored log-probs."""
    from omni_rl.engine.trajectory import keep_trained_steps

    sampler = build("sampler", "dance_sde", {"noise_level": 0.3, "window_size": 0, "timestep_fraction": 0.6})
    batch = keep_trained_steps(_rollout(model, sampler, cfg, steps=6), sampler, step=1, run_seed=0)
    assert batch.trajectory is not None and batch.trajectory.log_probs.shape == (4, 3)
    assert len({tuple(row) for row in batch.trajectory.step_indices.tolist()}) > 1  # samples train different steps
    loss = build("loss", "flow_grpo", {})
    params = list(model.trainable_parameters())
    engine = TrajectoryUpdate(model, sampler, loss, torch.optim.AdamW(params), OptimConfig(micro_batch=3))
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    ratio = torch.exp(recomputed - batch.trajectory.log_probs)
    assert torch.max(torch.abs(ratio - 1)).item() < 1e-6


def test_same_prompt_and_seed_give_the_same_image(model) -> None:
    sampler = build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 4]})
    first = _rollout(model, sampler, 4.5)
    second = _rollout(model, sampler, 4.5)
    assert torch.equal(first.images, second.images)
    assert not torch.equal(first.images[0], first.images[1])  # same prompt, different seed


def test_ode_rollout_equals_the_diffusers_pipeline(model, tiny_sd3: Path) -> None:
    from diffusers import StableDiffusion3Pipeline

    ode = build("sampler", "ode", {})
    for cfg in (1.0, 4.5):
        batch = _rollout(model, ode, cfg, steps=5, mode="eval")
        pipe = StableDiffusion3Pipeline.from_pretrained(tiny_sd3)
        for k in (0, 2):
            expected = pipe(
                PROMPTS[k],
                num_inference_steps=5,
                guidance_scale=cfg,
                height=32,
                width=32,
                generator=torch.Generator().manual_seed(SEEDS[k]),
                output_type="latent",
            ).images
            np.testing.assert_allclose(batch.final_latents[k : k + 1].numpy(), expected.numpy(), atol=1e-5, rtol=0)
