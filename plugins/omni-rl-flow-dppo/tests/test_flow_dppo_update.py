"""flow_dppo through the real trajectory update (tiny random SD3, diffusers rollout, the update's own old view),
with both samplers it serves (flow_sde, cps off the last step) and the KL term on and off: with unchanged weights
every call's ratio is 1 (docs/math.md#on-policy-ratio, |ρ − 1| < 1e-6), KL_new,old is 0 and nothing is dropped; after an
optimizer step the second mini-batch has moved (KL_new,old > 0) and everything stays finite."""

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
#: steps 1 and 2 of a 4-step schedule: off the last step, where cps's std is 0
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


def _update(model: Any, sampler_name: str, options: dict, mini_batch: int) -> tuple[list[dict], dict[str, float]]:
    sampler = build("sampler", sampler_name, WINDOW)
    backend = build("rollout", "diffusers", {"group_size": 2, "steps": 4, "height": 32, "width": 32, "cfg": 4.5})
    params = list(model.trainable_parameters())
    with torch.no_grad():  # LoRA away from its zero init, so the reference differs from the policy
        for p in params:
            p.add_(0.02 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    request = RolloutRequest(prompts=PROMPTS, group_ids=[0, 0, 1, 1], seeds=[1, 2, 3, 4], step=1)
    batch = backend.generate(model, sampler, request)
    loss = _Recorder(build("loss", "flow_dppo", options))
    optim = OptimConfig(lr=1e-2, micro_batch=2, mini_batch=mini_batch)
    engine = TrajectoryUpdate(model, sampler, loss, torch.optim.AdamW(params, lr=1e-2), optim)
    stats = engine.run(batch, torch.tensor([1.0, -1.0, 0.5, -0.5]), {}, generator=torch.Generator().manual_seed(0))
    return loss.calls, merge_stats([stats])


@pytest.mark.parametrize("sampler_name", ["flow_sde", "cps"])
@pytest.mark.parametrize("kl_coef", [0.0, 0.04], ids=["no-kl", "kl"])
def test_on_policy_ratio_one_and_nothing_dropped(model: Any, sampler_name: str, kl_coef: float) -> None:
    calls, merged = _update(model, sampler_name, {"kl_coef": kl_coef}, mini_batch=4)  # one optimizer step
    assert len(calls) == 4  # 2 micro-batches x 2 window steps
    for metrics in calls:
        assert abs(metrics["ratio_mean"] - 1) < 1e-6
        assert metrics["kl_new_old"] < 1e-12 and metrics["dppo_masked_fraction"] == 0.0
        assert ("kl" in metrics) == (kl_coef > 0)
    assert {k for k in merged if "/step_" in k} == {"ratio_mean/step_1", "ratio_mean/step_2"}
    assert merged["optimizer_steps"] == 1.0


@pytest.mark.parametrize("sampler_name", ["flow_sde", "cps"])
def test_off_policy_the_policy_moves_and_stays_finite(model: Any, sampler_name: str) -> None:
    calls, merged = _update(model, sampler_name, {"kl_coef": 0.04}, mini_batch=2)  # two optimizer steps
    assert merged["optimizer_steps"] == 2.0
    assert all(m["kl_new_old"] > 0 for m in calls[2:])  # the second mini-batch, after the first step
    assert all(v == v and abs(v) != float("inf") for v in merged.values())
