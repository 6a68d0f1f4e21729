"""The policy-gradient update over a recorded trajectory (the Flow-GRPO family).

For every optimizer step (a mini-batch of samples) and every micro-batch × window timestep: forward the views
the loss asked for (current with gradients; old and reference without), one backward per micro-batch and
timestep, gradient accumulation to the mini-batch, global grad-norm clipping, then the optimizer step. A
non-finite gradient skips that optimizer step and is counted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from contextlib import AbstractContextManager
from typing import Any

import torch

from omni_rl.batch import RolloutBatch, SamplerStep, TrajectoryLossInputs
from omni_rl.protocols import DiffusionModel, Loss, Sampler
from omni_rl.rollout_correction import SumAcross, correction_weights, diagnostic_sums
from omni_rl.runtime.sharding import Shard
from omni_rl.runtime.stepping import GradSync, Lockstep, OptimizerStepper, UpdateStats
from omni_rl.schema import OptimConfig, RolloutCorrectionConfig


def _chunks(indices: torch.Tensor, size: int) -> list[torch.Tensor]:
    return [indices[i : i + size] for i in range(0, len(indices), size)]


class TrajectoryUpdate:
    """One training step's update for losses with ``requirements.inputs == "trajectory"``."""

    def __init__(
        self,
        model: DiffusionModel,
        sampler: Sampler,
        loss: Loss,
        optimizer: torch.optim.Optimizer,
        optim: OptimConfig,
        grad_sync: GradSync | None = None,
        lockstep: Lockstep | None = None,
        correction: RolloutCorrectionConfig | None = None,
        sum_across: SumAcross | None = None,
    ) -> None:
        self.model = model
        self.sampler = sampler
        self.loss = loss
        self.optimizer = optimizer
        self.optim = optim
        #: [rollout_correction] (None: off); ``sum_across`` sums its batch normalisation over the worker group
        self.correction = correction or RolloutCorrectionConfig()
        self.sum_across = sum_across
        self.stepper = OptimizerStepper(optimizer, optim, grad_sync)
        #: FSDP2: every worker runs as many micro-batch passes as the busiest one (padding passes weigh 0)
        self.lockstep = lockstep

    def _step(
        self, batch: RolloutBatch, idx: torch.Tensor, j: int, *, grad: bool, reference: bool = False
    ) -> SamplerStep:
        traj = batch.trajectory
        assert traj is not None
        device = self.model.device
        x = traj.latents[idx, j].to(device)
        sigma = traj.sigmas[idx, j].to(device)
        sigma_next = traj.next_sigmas[idx, j].to(device)
        cond = batch.conditioning.index(idx).to(device)
        with torch.set_grad_enabled(grad):
            if reference:
                with self.model.disable_adapters():
                    v = self.model.predict_velocity(x, sigma, cond, traj.guidance_scale)
            else:
                v = self.model.predict_velocity(x, sigma, cond, traj.guidance_scale)
            return self.sampler.step(
                x,
                v,
                sigma,
                sigma_next,
                sigma_max=traj.sigma_max[idx].to(device),
                prev_sample=traj.next_latents[idx, j].to(device),
            )

    @torch.no_grad()
    def old_views(self, batch: RolloutBatch, keep_steps: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Old log-probs (N, W), and the old steps' means and stds when the loss wants the old view."""
        traj = batch.trajectory
        assert traj is not None
        n, w = traj.log_probs.shape
        log_probs = torch.empty(n, w, dtype=torch.float32)
        old: dict[str, torch.Tensor] = {}
        chunks = _chunks(torch.arange(n), self.optim.micro_batch)
        if self.lockstep is not None:  # FSDP2: extra no-grad passes whose results are dropped
            padding = self.lockstep([len(chunks)])[0] - len(chunks)
            for _ in range(padding):
                for j in range(w):
                    self._step(batch, chunks[0], j, grad=False)
        for idx in chunks:
            for j in range(w):
                out = self._step(batch, idx, j, grad=False)
                log_probs[idx, j] = out.log_prob.float().cpu()
                if keep_steps:
                    if not old:
                        old["mean"] = torch.empty(n, w, *out.mean.shape[1:])
                        old["std_dev_t"] = torch.empty(n, w, *([1] * (out.mean.ndim - 1)))
                    old["mean"][idx, j] = out.mean.cpu()
                    std = torch.as_tensor(out.std_dev_t, dtype=torch.float32).cpu()
                    old["std_dev_t"][idx, j] = (
                        std.expand(len(idx), *([1] * (out.mean.ndim - 1)))
                        if (std.numel() == 1)
                        else std.reshape(len(idx), *([1] * (out.mean.ndim - 1)))
                    )
        return log_probs, old

    def run(
        self,
        batch: RolloutBatch,
        advantages: torch.Tensor,
        extras: Mapping[str, torch.Tensor],
        *,
        generator: torch.Generator,
        shard: Shard | None = None,
        behaviour: AbstractContextManager[Any] | None = None,
    ) -> dict[str, Any]:
        """One step's update; returns :class:`UpdateStats` as a dict (the driver merges workers), with the rollout
        correction's diagnostic sums under ``"rollout_corr"`` when both log-probs exist.

        ``behaviour``: a context in which the model holds the weights version that sampled the batch (a stale
        batch, ``[run] max_staleness``), for the old log-probs' recompute; None: the weights as they are."""
        traj = batch.trajectory
        if traj is None:
            raise RuntimeError("the rollout recorded no trajectory but the loss needs per-step log-probs")
        w = traj.log_probs.shape[1]
        shard = shard or Shard.whole(batch.group_ids.tolist())
        views = self.loss.requirements.views
        old_log_probs, old_steps, sample_weights, diagnostics = self._old_log_probs(batch, behaviour)

        device = self.model.device
        stats = UpdateStats()
        filler = torch.arange(min(self.optim.micro_batch, len(shard.sample_ids)))
        for _epoch in range(self.optim.epochs):
            minibatches = shard.minibatches(generator, self.optim.mini_batch)
            plans = [_chunks(shard.local_positions(mb), self.optim.micro_batch) for mb in minibatches]
            rounds = self.lockstep([len(p) for p in plans]) if self.lockstep else [len(p) for p in plans]
            for mb, chunks, count in zip(minibatches, plans, rounds, strict=True):
                self.stepper.zero_grad()
                # padding passes (FSDP2 only): a real micro-batch of this worker's, weighted 0 and not counted
                passes = [(idx, True) for idx in chunks] + [(filler, False)] * (count - len(chunks))
                for idx, real in passes:
                    weight = len(idx) / (len(mb) * w) if real else 0.0
                    for j in range(w):
                        current = self._step(batch, idx, j, grad=True)
                        reference = (
                            self._step(batch, idx, j, grad=False, reference=True) if ("reference" in views) else None
                        )
                        old = None
                        if "old" in views:
                            old = SamplerStep(
                                sample=traj.next_latents[idx, j].to(device),
                                mean=old_steps["mean"][idx, j].to(device),
                                std_dev_t=old_steps["std_dev_t"][idx, j].to(device),
                                log_prob=old_log_probs[idx, j].to(device),
                            )
                        inputs = TrajectoryLossInputs(
                            current=current,
                            old_log_prob=old_log_probs[idx, j].to(device),
                            advantages=advantages[idx].to(device),
                            old=old,
                            reference=reference,
                            sigmas=traj.sigmas[idx, j].to(device),
                            next_sigmas=traj.next_sigmas[idx, j].to(device),
                            extras={k: v[idx].to(device) for k, v in extras.items()},
                            step_indices=traj.step_indices[idx, j].to(device),
                            weights=None if sample_weights is None else sample_weights[idx, j].to(device),
                        )
                        out = self.loss(inputs)
                        self.stepper.backward(out.loss, weight)
                        if real:
                            stats.add_loss(float(out.loss.detach()), weight, out.metrics, len(idx), out.metric_counts)
                stats.record_step(self.stepper.step())
        out = stats.to_dict()
        if diagnostics:
            out["rollout_corr"] = diagnostics
        return out

    def _old_log_probs(
        self, batch: RolloutBatch, behaviour: AbstractContextManager[Any] | None
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor | None, dict[str, float]]:
        """(old log-probs (N, W), old steps' means and stds, per-element loss weights or None, diagnostic sums).

        ``[rollout_correction] mode``: ``off`` recomputes when ``[optim] recompute_old_log_probs`` or the loss's
        old view asks for it, as before; ``bypass`` uses the rollout's log-probs and recomputes only for the old
        view or the rejection; ``decoupled`` always recomputes, and the IS weights (× not rejected) weight the loss.
        """
        traj = batch.trajectory
        assert traj is not None
        rc = self.correction
        views = self.loss.requirements.views
        rollout = traj.log_probs.float()
        if rc.mode == "off":
            recompute = self.optim.recompute_old_log_probs or "old" in views
        elif rc.mode == "bypass":
            recompute = "old" in views or rc.rejection != "off"
        else:
            recompute = True
        if not recompute:
            return rollout, {}, None, {}
        with behaviour if behaviour is not None else contextlib.nullcontext():
            recomputed, old_steps = self.old_views(batch, keep_steps="old" in views)
        result = correction_weights(
            rollout,
            recomputed,
            mode=rc.mode,
            is_level=rc.is_level,
            is_threshold=rc.is_threshold,
            normalize=rc.is_batch_normalize,
            rejection=rc.rejection,
            band=rc.rejection_band,
            sum_across=self.sum_across,
        )
        diagnostics = diagnostic_sums(rollout, recomputed, result, traj.step_indices)
        old = rollout if rc.mode == "bypass" else recomputed
        return old, old_steps, result.weights, diagnostics
