"""The self-checks of docs/math.md#self-checks for Qwen-Image through the real rollout backend, samplers and
update engine.

1. On-policy ratio: re-scoring the stored rollout steps with unchanged weights gives ratio 1 to 1e-6 in float32
   for flow_sde and cps, true CFG on and off, with prompts of different token counts in one micro-batch (and one
   rollout chunk), so their text is padded and masked.
2. A full ODE rollout through the backend equals QwenImagePipeline's own output for the same seed, prompt, steps
   and true CFG scale.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from omni_rl_qwen_image.latents import pack
from qwen_image_helpers import pipe_sample

from omni_rl import build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest

#: two prompts of different lengths, two samples each; chunks of 3 mix them, and so do micro-batches of 3
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
@pytest.mark.parametrize("cfg", [1.0, 4.0])
def test_on_policy_ratio_is_one(qwen_model, sampler_name: str, cfg: float) -> None:
    sampler = build("sampler", sampler_name, {"window_size": 3, "window_range": [0, 4]})
    batch = _rollout(qwen_model, sampler, cfg)
    assert batch.trajectory is not None and batch.trajectory.log_probs.shape == (4, 3)
    mask = batch.conditioning.tensors["prompt_embeds_mask"]
    assert mask[0].sum() < mask[2].sum()  # one conditioning tensor, padded to the longer prompt
    loss = build("loss", "flow_grpo", {})
    params = list(qwen_model.trainable_parameters())
    engine = TrajectoryUpdate(qwen_model, sampler, loss, torch.optim.AdamW(params), OptimConfig(micro_batch=3))
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    ratio = torch.exp(recomputed - batch.trajectory.log_probs)
    assert torch.max(torch.abs(ratio - 1)).item() < 1e-6


@pytest.mark.parametrize("cfg", [1.0, 4.0])
def test_ode_rollout_equals_the_pipeline(qwen_model, base_pipe, cfg: float) -> None:
    batch = _rollout(qwen_model, build("sampler", "ode", {}), cfg, steps=4, mode="eval")
    for k in (0, 2):
        latents, images = pipe_sample(base_pipe, PROMPTS[k], steps=4, guidance=cfg, seed=SEEDS[k])
        torch.testing.assert_close(pack(batch.final_latents[k : k + 1]), latents, rtol=0, atol=1e-5)
        assert (batch.images[k].int() - images[0].int()).abs().max() <= 1
