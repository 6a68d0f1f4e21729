"""The self-checks of docs/math.md#self-checks for Qwen-Image-Edit and Qwen-Image-Edit-Plus (two condition images,
``zero_cond_t``), through the real ``diffusers`` rollout backend, samplers and update engine:

1. An ODE rollout through the backend equals the pipeline's own ``__call__`` (same condition images, prompt, seed,
   steps and true CFG scale) within 1 level on the decoded pixels. The pipelines are given the plugin's stand-in
   processor (``Qwen2VLProcessor`` cannot be built without torchvision; the stand-in returns its tensors, see
   test_qwen_image_edit_prompts.py) and their ~1 MP condition resize is set to the model's ``condition_max_area``
   / ``vlm_condition_max_area`` (qwen_image_edit_helpers.pipeline_areas), so both compute the same sizes.
2. The first step's on-policy ratio is 1 (to 1e-6, float32): flow_sde and cps, true CFG on and off, with groups
   whose conditions differ in shape in one rollout chunk and one micro-batch.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from omni_rl_pipelines.testing import first_update_ratio
from omni_rl_qwen_image.latents import pack
from qwen_image_edit_helpers import pipe_output, rollout, source

from omni_rl import build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest

STEPS = 4
SEEDS = [11, 12, 13, 14]
#: two groups: a 96 x 64 source (kept at 96 x 64, 96 condition tokens) and a square one (64 x 64, 64 tokens)
EDIT_GROUPS = [("make it blue", (source(64, 96, 0),)), ("add a red square", (source(80, 80, 1),))]
#: Plus: two condition images per prompt, in different orders and sizes per group
PLUS_GROUPS = [
    ("put Picture 2 on Picture 1", (source(64, 96, 2), source(72, 72, 3))),
    ("make it blue", (source(90, 90, 4), source(64, 96, 5))),
]


def _request(groups: list, mode: str) -> RolloutRequest:
    prompts = [p for p, _ in groups for _ in range(2)]
    conditions = [c for _, c in groups for _ in range(2)]
    return RolloutRequest(
        prompts=prompts,
        group_ids=[0, 0, 1, 1],
        seeds=SEEDS,
        step=1 if mode == "train" else -1,
        mode=mode,
        run_seed=0,
        conditions=conditions,
    )


def _case(name: str, request: Any) -> tuple[Any, Any, list]:
    model, pipe = (request.getfixturevalue(f"{name}_model"), request.getfixturevalue(f"{name}_pipe"))
    return model, pipe, (PLUS_GROUPS if name == "plus" else EDIT_GROUPS)


@pytest.mark.parametrize("name", ["edit", "plus"])
@pytest.mark.parametrize("cfg", [1.0, 4.0])
def test_ode_rollout_equals_the_pipelines_call(name: str, cfg: float, request: pytest.FixtureRequest) -> None:
    model, pipe, groups = _case(name, request)
    batch = rollout(model, build("sampler", "ode", {}), _request(groups, "eval"), cfg=cfg, steps=STEPS)
    shapes = batch.conditioning.tensors["condition_shapes"]
    assert not torch.equal(shapes[0], shapes[2])  # the groups' conditions differ in shape: two layouts, one chunk
    for k in (0, 3):
        prompt, sources = groups[k // 2]
        latents, reference = pipe_output(pipe, prompt, sources, steps=STEPS, cfg=cfg, seed=SEEDS[k])
        # another source (same prompt and seed) moves these latents by 7e-3 (Plus) to 7e-2 (Edit): 1e-5 sees it
        torch.testing.assert_close(pack(batch.final_latents[k : k + 1]), latents, rtol=0, atol=1e-5)
        assert batch.images[k].shape == reference[0].shape
        assert (batch.images[k].int() - reference[0].int()).abs().max() <= 1


def test_plus_pipeline_has_zero_cond_t_and_it_matters(plus_model) -> None:
    """The 2511 flag is on in the tiny Plus transformer, and it changes the velocity (so the test above covers it)."""
    assert plus_model.zero_cond_t and plus_model.transformer.config.zero_cond_t
    prompt, sources = PLUS_GROUPS[0]
    conditioning = plus_model.encode_conditions([prompt], [sources], guidance_scale=1.0)
    x = torch.randn((1, *plus_model.latent_shape(32, 32)), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        on = plus_model.predict_velocity(x, torch.tensor([0.6]), conditioning, 1.0)
        plus_model.transformer.zero_cond_t = False
        for block in plus_model.transformer.transformer_blocks:
            block.zero_cond_t = False
        try:
            off = plus_model.predict_velocity(x, torch.tensor([0.6]), conditioning, 1.0)
        finally:
            plus_model.transformer.zero_cond_t = True
            for block in plus_model.transformer.transformer_blocks:
                block.zero_cond_t = True
    assert not torch.allclose(on, off, atol=1e-4)


@pytest.mark.parametrize("name", ["edit", "plus"])
@pytest.mark.parametrize("sampler_name", ["flow_sde", "cps"])
@pytest.mark.parametrize("cfg", [1.0, 4.0])
def test_on_policy_ratio_is_one(name: str, sampler_name: str, cfg: float, request: pytest.FixtureRequest) -> None:
    model, _, groups = _case(name, request)
    sampler = build("sampler", sampler_name, {"window_size": 3, "window_range": [0, 4]})
    batch = rollout(model, sampler, _request(groups, "train"), cfg=cfg, steps=STEPS, batch_size=3)
    assert batch.trajectory is not None and batch.trajectory.log_probs.shape == (4, 3)
    params = list(model.trainable_parameters())
    engine = TrajectoryUpdate(
        model, sampler, build("loss", "flow_grpo", {}), torch.optim.AdamW(params), OptimConfig(micro_batch=3)
    )
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    ratio = torch.exp(recomputed - batch.trajectory.log_probs)
    assert torch.max(torch.abs(ratio - 1)).item() < 1e-6


@pytest.mark.parametrize("name", ["edit", "plus"])
def test_first_update_ratio_is_one(name: str, request: pytest.FixtureRequest) -> None:
    """The first update's mean ratio (Flow-GRPO, learning rate 0), through the trained (grad) forward."""
    model, _, groups = _case(name, request)
    sampler = build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 3]})
    batch = rollout(model, sampler, _request(groups, "train"), cfg=4.0, steps=STEPS)
    ratio, _ = first_update_ratio(model, sampler, batch)
    assert abs(ratio - 1.0) < 1e-6
