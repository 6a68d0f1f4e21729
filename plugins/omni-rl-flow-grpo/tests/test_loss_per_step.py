"""flow_grpo's per-timestep ratio means (``ratio_mean/step_<j>``) and the helper every policy-gradient loss uses."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_flow_grpo.config import FlowGRPOLossConfig
from omni_rl_flow_grpo.loss import FlowGRPOLoss
from omni_rl_flow_grpo.per_step import per_step_means

from omni_rl.batch import SamplerStep, TrajectoryLossInputs

OLD = [-0.3, -0.2, -0.1, -0.4]
RATIO = [1 + 2e-4, 1 - 3e-4, 1 + 5e-5, 1 - 2e-4]


def _inputs(step_indices: torch.Tensor | None) -> TrajectoryLossInputs:
    log_prob = torch.tensor([o + math.log(r) for o, r in zip(OLD, RATIO, strict=True)], requires_grad=True)
    mean = torch.zeros(4, 2, 2)
    return TrajectoryLossInputs(
        current=SamplerStep(sample=mean, mean=mean, std_dev_t=torch.ones(4), log_prob=log_prob),
        old_log_prob=torch.tensor(OLD),
        advantages=torch.tensor([1.0, 2.0, -3.0, -1.5]),
        step_indices=step_indices,
    )


def test_ratio_mean_per_step_by_hand() -> None:
    """Samples 0 and 2 at step 3, 1 at step 0, 3 at step 7 (a column mixing steps): each step's mean covers
    exactly its samples and says how many; the batch-wide metrics are the ones without step indices."""
    loss = FlowGRPOLoss(FlowGRPOLossConfig(clip_ratio=1e-4))
    out = loss(_inputs(torch.tensor([3, 0, 3, 7])))
    step_keys = {key for key in out.metrics if "/step_" in key}
    assert step_keys == {"ratio_mean/step_0", "ratio_mean/step_3", "ratio_mean/step_7"}
    assert out.metrics["ratio_mean/step_3"] == pytest.approx((RATIO[0] + RATIO[2]) / 2, abs=1e-7)
    assert out.metrics["ratio_mean/step_0"] == pytest.approx(RATIO[1], abs=1e-7)
    assert out.metrics["ratio_mean/step_7"] == pytest.approx(RATIO[3], abs=1e-7)
    assert out.metric_counts == {"ratio_mean/step_0": 1, "ratio_mean/step_3": 2, "ratio_mean/step_7": 1}

    plain = loss(_inputs(None))
    assert plain.metric_counts == {}
    assert {key: out.metrics[key] for key in plain.metrics} == plain.metrics  # existing metrics unchanged
    assert torch.equal(out.loss, plain.loss)


def test_per_step_means_rejects_mismatched_steps() -> None:
    with pytest.raises(ValueError, match=r"ratio_mean: 3 values but 2 step indices"):
        per_step_means("ratio_mean", torch.ones(3), torch.tensor([0, 1]))
    assert per_step_means("x", torch.ones(2), None) == ({}, {})
