"""The optimizer step skips on a non-finite loss, not only on a non-finite gradient: a NaN in a term without
gradient (a detached reference, a reward-derived weight) leaves finite gradients behind."""

from __future__ import annotations

import torch

from omni_rl.config.schema import OptimConfig
from omni_rl.engine.stepping import OptimizerStepper, UpdateStats, merge_stats


def _stepper(grad_sync=None) -> tuple[torch.nn.Parameter, OptimizerStepper]:
    param = torch.nn.Parameter(torch.ones(3))
    return param, OptimizerStepper(torch.optim.SGD([param], lr=0.1), OptimConfig(grad_clip=0.0), grad_sync)


def test_a_non_finite_loss_with_a_finite_gradient_is_skipped_and_counted() -> None:
    param, stepper = _stepper()
    stats = UpdateStats()
    stepper.zero_grad()
    stepper.backward(param.sum() + torch.tensor(float("nan")), 1.0)  # d/dparam = 1: finite
    stats.record_step(stepper.step())
    assert torch.equal(param.detach(), torch.ones(3))
    assert param.grad is None  # cleared for the next step
    stepper.zero_grad()  # the next optimizer step starts clean and is taken
    stepper.backward(param.sum(), 1.0)
    stats.record_step(stepper.step())
    assert torch.allclose(param.detach(), torch.full((3,), 0.9))
    metrics = merge_stats([stats.to_dict()])
    assert (metrics["skipped_steps"], metrics["optimizer_steps"]) == (1.0, 1.0)


def test_a_non_finite_loss_reaches_every_worker_through_the_gradient_sum() -> None:
    """Workers decide to skip from the summed gradient's norm: a worker with a NaN loss must poison its part of
    the sum, or the others would step while it does not."""
    seen: list[torch.Tensor] = []

    def record_sync(params: list[torch.nn.Parameter]) -> None:
        seen.extend(p.grad.clone() for p in params)

    param, stepper = _stepper(record_sync)
    stepper.zero_grad()
    stepper.backward(param.sum() + torch.tensor(float("inf")), 1.0)  # finite gradient here too
    assert stepper.step() is None
    assert len(seen) == 1 and torch.isnan(seen[0]).all()
