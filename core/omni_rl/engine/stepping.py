"""What every update engine shares: the optimizer step (gradient sum across workers, clipping, skipping a
non-finite step or one without training signal) and the statistics each worker returns for the driver to merge."""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import torch

from omni_rl.config.schema import OptimConfig

GradSync = Callable[[list[torch.nn.Parameter]], None]
#: FSDP2: per mini-batch, this worker's micro-batch count -> the count every worker runs (the maximum)
Lockstep = Callable[[list[int]], list[int]]


class OptimizerStepper:
    """Sum gradients across workers (when distributed), clip the global norm, and step unless it is not finite
    or exactly zero.

    A gradient of exactly zero everywhere carries no training signal: DPO with every group skipped (no reward
    spread), GRPO with all-zero advantages and no KL. AdamW would still move the weights (momentum, weight decay),
    so that step is skipped too. The norm is the global one (summed across workers first), so every worker agrees.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, optim: OptimConfig, grad_sync: GradSync | None) -> None:
        self.optimizer = optimizer
        self.params = [p for group in optimizer.param_groups for p in group["params"]]
        self.clip = optim.grad_clip if optim.grad_clip > 0 else float("inf")
        self.grad_sync = grad_sync
        #: any non-finite loss since the last zero_grad, as a tensor: read once per optimizer step, not per
        #: backward (reading it is a device sync on GPU)
        self.nonfinite_loss: torch.Tensor | None = None

    def zero_grad(self) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        self.nonfinite_loss = None

    def backward(self, loss: torch.Tensor, weight: float) -> None:
        """``(loss * weight).backward()``, noting a non-finite loss: its optimizer step is then skipped like a
        non-finite gradient's, even where the gradient happens to be finite (a NaN in a detached term)."""
        bad = ~torch.isfinite(loss.detach()).all()
        self.nonfinite_loss = bad if self.nonfinite_loss is None else self.nonfinite_loss | bad
        (loss * weight).backward()

    def step(self) -> float | None:
        """The pre-clip gradient norm; None when the step was skipped for a non-finite loss or gradient, and 0.0
        when it was skipped for an all-zero gradient (see :func:`took_step`)."""
        loss_finite = self.nonfinite_loss is None or not bool(self.nonfinite_loss)
        if not loss_finite:
            # NaN gradients: the sum across workers (or FSDP2's global norm) carries them, so every worker skips
            for p in self.params:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
                p.grad.fill_(float("nan"))
        if self.grad_sync is not None:
            self.grad_sync(self.params)
        # over FSDP2 shards (DTensors) the norm is the global one, all-reduced, and comes back replicated
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.clip)
        full_tensor = getattr(grad_norm, "full_tensor", None)
        if full_tensor is not None:
            grad_norm = full_tensor()
        if not torch.isfinite(grad_norm) or not loss_finite:
            self.zero_grad()
            return None
        if float(grad_norm) == 0.0:  # no training signal: leave the weights and the optimizer state as they are
            self.zero_grad()
            return 0.0
        self.optimizer.step()
        return float(grad_norm)


def took_step(grad_norm: float | None) -> bool:
    """Whether :meth:`OptimizerStepper.step` stepped the optimizer, from what it returned."""
    return grad_norm is not None and grad_norm > 0.0


@attrs.define
class UpdateStats:
    """One worker's update, as sums rather than means, so the driver merges workers exactly (metric means are
    weighted by samples). Update engines return it; the policy worker adds the learning rate; the driver merges
    every worker's with :func:`merge_stats`."""

    sums: dict[str, float] = attrs.field(factory=lambda: defaultdict(float))
    counts: dict[str, int] = attrs.field(factory=lambda: defaultdict(int))
    loss_sum: float = 0.0
    grad_norms: list[float] = attrs.field(factory=list)
    skipped: int = 0
    #: optimizer steps skipped because the gradient was exactly zero (no training signal)
    no_signal: int = 0
    #: the learning rate the update ran with (the policy worker sets it)
    lr: float | None = None
    #: rollout correction's diagnostic sums (omni_rl.engine.rollout_correction), when both log-probs exist
    rollout_corr: dict[str, float] = attrs.field(factory=dict)

    def add_loss(
        self,
        loss: float,
        weight: float,
        metrics: Mapping[str, Any],
        samples: int,
        metric_counts: Mapping[str, int] | None = None,
    ) -> None:
        """One loss call's metrics, each weighted by the samples it covers: ``samples`` (the call's), or its
        entry in ``metric_counts`` (:attr:`~omni_rl.batch.LossOutput.metric_counts`, e.g. a per-timestep mean
        of a few of them); a metric covering no sample is left out rather than added as 0 · NaN."""
        self.loss_sum += loss * weight
        counts = metric_counts or {}
        for key, value in metrics.items():
            n = counts.get(key, samples)
            if n <= 0:
                continue
            self.sums[key] += float(value) * n
            self.counts[key] += n

    def record_step(self, grad_norm: float | None) -> None:
        if grad_norm is None:
            self.skipped += 1
        elif not took_step(grad_norm):
            self.no_signal += 1
        else:
            self.grad_norms.append(grad_norm)

    def mean(self, key: str) -> float:
        """A metric's sample-weighted mean over this worker's update."""
        return self.sums[key] / self.counts[key]

    def to_dict(self) -> dict[str, Any]:
        """The record as plain values (JSON-shaped)."""
        return {
            "sums": dict(self.sums),
            "counts": dict(self.counts),
            "loss_sum": self.loss_sum,
            "grad_norms": list(self.grad_norms),
            "skipped": self.skipped,
            "no_signal": self.no_signal,
            "lr": self.lr,
            "rollout_corr": dict(self.rollout_corr),
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> UpdateStats:
        """The record from :meth:`to_dict`'s shape (update engines of omni-rl 0.1.0 returned that dict)."""
        stats = cls(
            loss_sum=float(values.get("loss_sum", 0.0)),
            grad_norms=list(values.get("grad_norms", [])),
            skipped=int(values.get("skipped", 0)),
            no_signal=int(values.get("no_signal", 0)),
            lr=values.get("lr"),
            rollout_corr=dict(values.get("rollout_corr", {})),
        )
        stats.sums.update(values.get("sums", {}))
        stats.counts.update(values.get("counts", {}))
        return stats

    def __getitem__(self, key: str) -> Any:
        """Read a field by name, as the dict engines returned in omni-rl 0.1.0 (deprecated: use the attribute)."""
        warnings.warn(
            f"UpdateStats[{key!r}] is deprecated: read the attribute (stats.{key}); removed in omni-rl 0.2",
            DeprecationWarning,
            stacklevel=2,
        )
        if key not in attrs.fields_dict(UpdateStats):
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        """``dict.get`` on the fields, for code written against 0.1.0's dict (deprecated)."""
        return self[key] if key in attrs.fields_dict(UpdateStats) else default


def merge_stats(parts: Sequence[UpdateStats | Mapping[str, Any]]) -> dict[str, float]:
    """Metrics of one update from every worker's :class:`UpdateStats` (grad norms agree across workers)."""
    stats = [p if isinstance(p, UpdateStats) else UpdateStats.from_dict(p) for p in parts]
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for part in stats:
        for key, value in part.sums.items():
            sums[key] += value
            counts[key] += part.counts[key]
    first = stats[0]
    updates = max(1, len(first.grad_norms) + first.skipped + first.no_signal)
    metrics = {key: sums[key] / counts[key] for key in sums if counts[key]}
    metrics["loss"] = sum(part.loss_sum for part in stats) / updates
    norms = first.grad_norms
    metrics["grad_norm"] = sum(norms) / len(norms) if norms else float("nan")
    metrics["skipped_steps"] = float(first.skipped)
    metrics["optimizer_steps"] = float(len(norms))
    metrics["no_signal_steps"] = float(first.no_signal)
    return metrics
