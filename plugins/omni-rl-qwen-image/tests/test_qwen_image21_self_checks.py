"""The self-checks of docs/math.md#self-checks for ``qwen_image21`` through the real ``diffusers`` rollout backend,
samplers and update engine (the ODE rollout against ``QwenImage21Pipeline.__call__`` is in
test_qwen_image21_model.py).

1. On-policy ratio: re-scoring the stored rollout steps with unchanged weights gives ratio 1, and the first
   Flow-GRPO update's mean ratio is 1, with and without CFG.
2. The LoRA ``save_lora`` writes loads with ``QwenImage21Pipeline.load_lora_weights`` and changes its output, to
   this policy's own pixels.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from omni_rl_pipelines.testing import first_update_ratio
from qwen_image21_helpers import SIZE, build_model21, euler21, load_pipe21, pipe21_sample

from omni_rl import build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest

PROMPTS = ["a red cat", "a red cat", "two blue squares on a green background", "two blue squares on a green background"]
SEEDS = [11, 12, 13, 14]


def _rollout(model: Any, sampler: Any, cfg: float) -> Any:
    options = {"group_size": 2, "steps": 4, "eval_steps": 4, "height": SIZE, "width": SIZE, "cfg": cfg}
    backend = build("rollout", "diffusers", {**options, "batch_size": 3})
    request = RolloutRequest(prompts=PROMPTS, group_ids=[0, 0, 1, 1], seeds=SEEDS, step=1, mode="train", run_seed=0)
    return backend.generate(model, sampler, request)


@pytest.mark.parametrize("cfg", [1.0, 4.0], ids=["no_cfg", "cfg"])
def test_on_policy_ratio_is_one(q21_model, cfg: float) -> None:
    sampler = build("sampler", "flow_sde", {"noise_level": 0.9, "window_size": 2, "window_range": [0, 3]})
    batch = _rollout(q21_model, sampler, cfg)
    assert batch.trajectory is not None
    params = list(q21_model.trainable_parameters())
    loss = build("loss", "flow_grpo", {})
    engine = TrajectoryUpdate(q21_model, sampler, loss, torch.optim.AdamW(params), OptimConfig(micro_batch=3))
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    assert torch.max(torch.abs(torch.exp(recomputed - batch.trajectory.log_probs) - 1)).item() < 1e-5
    ratio, _ = first_update_ratio(q21_model, sampler, batch)
    assert abs(ratio - 1.0) < 1e-5


def test_saved_lora_loads_with_the_pipelines_load_lora_weights(tiny_q21_path: Path, tmp_path: Path) -> None:
    model = build_model21(tiny_q21_path, lora_alpha=8.0)
    with torch.no_grad():
        generator = torch.Generator().manual_seed(3)
        for p in model.trainable_parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.3)
    model.save_lora(tmp_path / "lora")
    assert (tmp_path / "lora" / "pytorch_lora_weights.safetensors").is_file()
    pipe = load_pipe21(tiny_q21_path)
    before = pipe21_sample(pipe, PROMPTS[0], steps=2, cfg=1.0, seed=1)
    pipe.load_lora_weights(tmp_path / "lora")
    after = pipe21_sample(pipe, PROMPTS[0], steps=2, cfg=1.0, seed=1)
    assert (after.int() - before.int()).abs().max() > 1
    # and the loaded pipeline is this policy: the model's own Euler loop gives the same pixels
    assert (euler21(model, PROMPTS[0], steps=2, cfg=1.0, seed=1).int() - after.int()).abs().max() <= 1
