"""The self-checks of docs/math.md#self-checks through the real diffusers rollout backend, samplers and update
engine on tiny Wan pipelines (5-D video latents):

1. On-policy ratio: re-scoring the stored rollout steps with unchanged weights (the update's own old-log-prob
   path) gives ratio 1 to 1e-6 in float32, for flow_sde, cps and dance_sde, CFG on and off, on both layouts (the
   two-expert one with window steps on both sides of the boundary and micro-batches that mix them).
2. The rollout backend's ODE (validation) rollout equals WanPipeline's own frames for the same seed, prompt and
   steps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from wan_helpers import FRAMES, SIZE, build_model, load_pipe, pipeline_frames

from omni_rl import build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest

PROMPTS = ["a red circle", "a red circle", "two blue squares", "two blue squares"]
SEEDS = [11, 12, 13, 14]
STEPS = 4


@pytest.fixture(scope="module")
def models(tiny_wan_path: Path, tiny_wan22_path: Path) -> dict[str, object]:
    return {"wan21": build_model(tiny_wan_path), "wan22": build_model(tiny_wan22_path)}


def _rollout(model: object, sampler: object, cfg: float, mode: str = "train") -> object:
    options = {"group_size": 2, "steps": STEPS, "eval_steps": STEPS, "height": SIZE, "width": SIZE, "cfg": cfg}
    backend = build("rollout", "diffusers", {**options, "batch_size": 3, "num_frames": FRAMES})
    request = RolloutRequest(prompts=PROMPTS, group_ids=[0, 0, 1, 1], seeds=SEEDS, step=1, mode=mode, run_seed=0)
    return backend.generate(model, sampler, request)


@pytest.mark.parametrize("layout", ["wan21", "wan22"])
@pytest.mark.parametrize("sampler_name", ["flow_sde", "cps", "dance_sde"])
@pytest.mark.parametrize("cfg", [1.0, 4.5])
def test_on_policy_ratio_is_one(models: dict[str, object], layout: str, sampler_name: str, cfg: float) -> None:
    model = models[layout]
    sampler = build("sampler", sampler_name, {"window_size": 3, "window_range": [0, 4]})
    batch = _rollout(model, sampler, cfg)
    assert batch.images.shape == (4, FRAMES, SIZE, SIZE, 3) and batch.images.dtype == torch.uint8
    assert batch.trajectory is not None and batch.trajectory.latents.ndim == 6  # (N, W, C, F', h, w)
    assert batch.trajectory.log_probs.shape == (4, 3)
    loss = build("loss", "flow_grpo", {})
    params = list(model.trainable_parameters())
    engine = TrajectoryUpdate(model, sampler, loss, torch.optim.AdamW(params), OptimConfig(micro_batch=3))
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    ratio = torch.exp(recomputed - batch.trajectory.log_probs)
    assert torch.max(torch.abs(ratio - 1)).item() < 1e-6


def test_the_window_spans_both_experts(models: dict[str, object]) -> None:
    """The ratio test above is only a two-expert test if the window's steps reach both experts."""
    model = models["wan22"]
    sigmas = model.sigma_schedule(STEPS, SIZE, SIZE)[:3]
    timesteps = sigmas * 1000
    assert bool((timesteps >= model.boundary_timestep).any()) and bool((timesteps < model.boundary_timestep).any())


@pytest.mark.parametrize("layout", ["wan21", "wan22"])
def test_ode_rollout_equals_the_wan_pipeline(
    models: dict[str, object], layout: str, tiny_wan_path: Path, tiny_wan22_path: Path
) -> None:
    model = models[layout]
    batch = _rollout(model, build("sampler", "ode", {}), 4.5, mode="eval")
    pipe = load_pipe(tiny_wan_path if layout == "wan21" else tiny_wan22_path)
    shape = model.latent_shape(SIZE, SIZE, num_frames=FRAMES)
    noise = torch.randn((1, *shape), generator=torch.Generator().manual_seed(SEEDS[2]))
    reference = pipeline_frames(pipe, PROMPTS[2], noise, steps=STEPS, guidance=4.5)
    error = np.abs(batch.images[2:3].numpy().astype(np.float64) / 255 - reference).max()
    assert error <= 1 / 255


def test_num_frames_needs_a_video_model(tiny_wan_path: Path) -> None:
    """The image models refuse num_frames rather than sample images for a video config."""
    from omni_rl_diffusers.frames import rollout_latent_shape

    from omni_rl.errors import ConfigError

    class ImageModel:
        def latent_shape(self, height: int, width: int) -> tuple[int, int, int]:
            return (16, height // 8, width // 8)

    assert rollout_latent_shape(ImageModel(), 32, 32, 1) == (16, 4, 4)
    with pytest.raises(ConfigError, match="num_frames"):
        rollout_latent_shape(ImageModel(), 32, 32, 5)
