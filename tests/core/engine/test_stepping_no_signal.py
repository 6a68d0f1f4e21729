"""The optimizer stepper skips a step whose gradient is exactly zero (no training signal) instead of letting AdamW's
momentum and weight decay move the weights, and the merged metrics count it apart from non-finite skips."""

from __future__ import annotations

import copy

import torch

from omni_rl.config.schema import OptimConfig
from omni_rl.engine.stepping import OptimizerStepper, UpdateStats, merge_stats, took_step


def _stepper() -> tuple[torch.nn.Parameter, torch.optim.Optimizer, OptimizerStepper]:
    weight = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.AdamW([weight], lr=0.1, weight_decay=0.5)
    return weight, optimizer, OptimizerStepper(optimizer, OptimConfig(), grad_sync=None)


def test_zero_gradient_skips_the_step_and_keeps_the_optimizer_state() -> None:
    weight, optimizer, stepper = _stepper()
    stepper.zero_grad()
    stepper.backward((weight * torch.tensor([1.0, -2.0, 3.0])).sum(), 1.0)
    norm = stepper.step()
    assert took_step(norm) and norm > 0
    after_real, state = weight.detach().clone(), copy.deepcopy(optimizer.state_dict())

    stepper.zero_grad()
    stepper.backward(0.0 * weight.sum(), 1.0)  # reaches the weight, with a gradient of exactly 0
    norm = stepper.step()
    assert norm == 0.0 and not took_step(norm)
    assert torch.equal(weight.detach(), after_real)
    assert torch.equal(optimizer.state_dict()["state"][0]["exp_avg"], state["state"][0]["exp_avg"])
    assert float(optimizer.state_dict()["state"][0]["step"]) == float(state["state"][0]["step"])
    assert weight.grad is None


def test_no_signal_steps_are_counted_apart_from_non_finite_skips() -> None:
    stats = UpdateStats()
    stats.add_loss(0.5, 1.0, {}, 2)
    stats.record_step(2.0)
    stats.add_loss(0.0, 1.0, {}, 2)
    stats.record_step(0.0)
    stats.add_loss(1.0, 0.0, {}, 2)
    stats.record_step(None)
    metrics = merge_stats([stats.to_dict()])
    assert metrics["optimizer_steps"] == 1.0
    assert metrics["no_signal_steps"] == 1.0
    assert metrics["skipped_steps"] == 1.0
    assert metrics["grad_norm"] == 2.0  # the mean over the steps taken only
