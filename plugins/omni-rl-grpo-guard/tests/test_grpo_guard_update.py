"""grpo_guard through the real trajectory update (tiny random SD3, diffusers rollout, flow_sde, the update's own
old view): with unchanged weights every call's normalised ratio is 1 (docs/math.md#on-policy-ratio, |ρ − 1| < 1e-6) and
its bias b is 0, with the KL term on and off; once an optimizer step has moved the policy the second mini-batch's
ratio leaves 1 and stays finite. Per-step metrics cover the window's schedule steps."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

from omni_rl import build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.stepping import merge_stats
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

PROMPTS = ["a red circle", "a red circle", "two blue squares", "two blue squares"]
WINDOW = {"window_size": 2, "window_range": [1, 3], "window_mode": "fixed"}


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    path = build_tiny_sd3_pipeline(tmp_path_factory.mktemp("sd3") / "tiny", seed=0)
    return build("model", "sd3", {"path": str(Path(path)), "lora_rank": 4, "dtype": "float32"})


class _Recorder:
    """The loss, with every call's metrics kept."""

    def __init__(self, loss: Any) -> None:
        self.loss, self.requirements, self.calls = loss, loss.requirements, []

    def prepare(self, *args: Any) -> dict:
        return self.loss.prepare(*args)

    def __call__(self, inputs: Any) -> Any:
        out = self.loss(inputs)
        self.calls.append(out.metrics)
        return out


def _update(model: Any, options: dict[str, Any], mini_batch: int) -> tuple[list[dict], dict[str, float]]:
    sampler = build("sampler", "flow_sde", {"noise_level": 0.7, **WINDOW})
    backend = build("rollout", "diffusers", {"group_size": 2, "steps": 4, "height": 32, "width": 32, "cfg": 4.5})
    request = RolloutRequest(prompts=PROMPTS, group_ids=[0, 0, 1, 1], seeds=[1, 2, 3, 4], step=1)
    params = list(model.trainable_parameters())
    with torch.no_grad():  # LoRA away from its zero init, so the reference differs from the policy
        for p in params:
            p.add_(0.02 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    batch = backend.generate(model, sampler, request)
    loss = _Recorder(build("loss", "grpo_guard", options))
    optim = OptimConfig(lr=1e-2, micro_batch=2, mini_batch=mini_batch)
    engine = TrajectoryUpdate(model, sampler, loss, torch.optim.AdamW(params, lr=1e-2), optim)
    stats = engine.run(batch, torch.tensor([1.0, -1.0, 0.5, -0.5]), {}, generator=torch.Generator().manual_seed(0))
    return loss.calls, merge_stats([stats])


@pytest.mark.parametrize("kl_coef", [0.0, 0.04], ids=["no-kl", "kl"])
def test_on_policy_the_normalised_ratio_is_one(model: Any, kl_coef: float) -> None:
    calls, merged = _update(model, {"kl_coef": kl_coef}, mini_batch=4)  # one optimizer step, after every call
    assert len(calls) == 4  # 2 micro-batches x 2 window steps
    for metrics in calls:
        assert abs(metrics["ratio_mean"] - 1) < 1e-6 and abs(metrics["ratio_mean_raw"] - 1) < 1e-6
        assert metrics["ratio_bias"] < 1e-10
        assert metrics["clip_frac"] == 0.0
        assert ("kl" in metrics) == (kl_coef > 0)
    assert {k for k in merged if "/step_" in k} == {
        "ratio_mean/step_1",
        "ratio_mean/step_2",
        "ratio_mean_raw/step_1",
        "ratio_mean_raw/step_2",
    }
    assert merged["optimizer_steps"] == 1.0


def test_off_policy_the_ratio_moves_and_stays_finite(model: Any) -> None:
    calls, merged = _update(model, {"kl_coef": 0.04, "clip_ratio": 1e-4}, mini_batch=2)  # two optimizer steps
    assert merged["optimizer_steps"] == 2.0
    second = calls[2:]  # the second mini-batch, after the first optimizer step
    assert all(m["ratio_bias"] > 0 for m in second)
    assert any(abs(m["ratio_mean"] - 1) > 1e-7 for m in second)
    assert all(v == v and abs(v) != float("inf") for v in merged.values())
