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
from omni_rl.config.schema import OptimConfig, RolloutCorrectionConfig
from omni_rl.engine.auto_micro_batch import AutoMicroBatch, backward_probe
from omni_rl.engine.micro_batch import TrajectoryMicroBatch, trajectory_micro_batch
from omni_rl.engine.placement import to_device, to_host
from omni_rl.engine.rollout_correction import SumAcross, correction_weights, diagnostic_sums
from omni_rl.engine.sharding import Shard
from omni_rl.engine.stepping import GradSync, Lockstep, OptimizerStepper, UpdateStats
from omni_rl.protocols import DiffusionModel, Loss, Sampler


def _chunks(indices: torch.Tensor, size: int) -> list[torch.Tensor]:
    return [indices[i : i + size] for i in range(0, len(indices), size)]


def _std_column(std: Any, rows: int, ones: list[int], device: torch.device) -> torch.Tensor:
    """A step's noise scale (a scalar or one per sample) as (rows, 1, ...), broadcastable against the means."""
    t = torch.as_tensor(std, dtype=torch.float32, device=device)
    return t.reshape(-1, *ones).expand(rows, *ones)


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
        #: ``[optim]`` with ``micro_batch = "auto"`` resolved for the batch being updated (as configured otherwise)
        self.optim = optim
        self.auto_micro = AutoMicroBatch(optim)
        #: [rollout_correction] (None: off); ``sum_across`` sums its batch normalisation over the worker group
        self.correction = correction or RolloutCorrectionConfig()
        self.sum_across = sum_across
        self.stepper = OptimizerStepper(optimizer, optim, grad_sync)
        #: FSDP2: every worker runs as many micro-batch passes as the busiest one (padding passes weigh 0)
        self.lockstep = lockstep
        #: the CFG scale of the trajectory being updated (the rollout's: the ratio is 1 only with the same formula)
        self._guidance = 1.0

    def _step(self, micro: TrajectoryMicroBatch, j: int, *, grad: bool, reference: bool = False) -> SamplerStep:
        """Window step ``j`` of a micro-batch already on the device."""
        with torch.set_grad_enabled(grad):
            x = micro.latents[:, j]
            sigma = micro.sigmas[:, j]
            if reference:
                with self.model.disable_adapters():
                    v = self.model.predict_velocity(x, sigma, micro.conditioning, self._guidance)
            else:
                v = self.model.predict_velocity(x, sigma, micro.conditioning, self._guidance)
            return self.sampler.step(
                x,
                v,
                sigma,
                micro.next_sigmas[:, j],
                sigma_max=micro.sigma_max,
                prev_sample=micro.next_latents[:, j],
            )

    def _resolve_micro_batch(self, batch: RolloutBatch, samples: int) -> None:
        """``[optim] micro_batch = "auto"``: probe the largest micro-batch of this batch's shape that fits (the
        trained pass of window step 0 and, when the loss has one, the reference view beside it)."""
        if not self.auto_micro.auto:
            return
        traj = batch.trajectory
        assert traj is not None
        self._guidance = traj.guidance_scale
        reference = "reference" in self.loss.requirements.views

        def try_size(b: int) -> None:
            micro = to_device(trajectory_micro_batch(batch, torch.arange(b)), self.model.device)
            backward_probe(
                lambda: self._step(micro, 0, grad=True).log_prob,
                (lambda: self._step(micro, 0, grad=False, reference=True)) if reference else None,
            )

        shape = (*traj.latents.shape[2:], traj.log_probs.shape[1])
        self.optim = self.auto_micro.optim_for(self.model, shape, samples, try_size)

    @torch.no_grad()
    def old_views(self, batch: RolloutBatch, keep_steps: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Old log-probs (N, W), and the old steps' means and stds when the loss wants the old view: computed
        on the device one micro-batch at a time and gathered on the host (docs/placement.md)."""
        traj = batch.trajectory
        assert traj is not None
        n, w = traj.log_probs.shape
        if self.auto_micro.auto and self.optim is self.auto_micro.configured:
            self._resolve_micro_batch(batch, n)
        self._guidance = traj.guidance_scale
        device = self.model.device
        # a model whose trained (grad) forward runs other kernels than its no-grad one (regional torch.compile)
        # recomputes the old log-probs through the trained forward, so the on-policy ratio starts at exactly 1
        grad = bool(getattr(self.model, "old_log_probs_with_grad", False))
        chunks = _chunks(torch.arange(n), self.optim.micro_batch)
        if self.lockstep is not None:  # FSDP2: extra no-grad passes whose results are dropped
            padding = self.lockstep([len(chunks)])[0] - len(chunks)
            for _ in range(padding):
                micro = to_device(trajectory_micro_batch(batch, chunks[0]), device)
                for j in range(w):
                    self._step(micro, j, grad=grad)
        log_probs, means, stds = [], [], []
        for idx in chunks:
            micro = to_device(trajectory_micro_batch(batch, idx), device)
            steps = [self._step(micro, j, grad=grad) for j in range(w)]
            log_probs.append(torch.stack([s.log_prob.detach().float() for s in steps], dim=1))
            if keep_steps:
                means.append(torch.stack([s.mean.detach() for s in steps], dim=1))
                ones = [1] * (steps[0].mean.ndim - 1)
                stds.append(torch.stack([_std_column(s.std_dev_t, len(idx), ones, device) for s in steps], dim=1))
        record = {"log_probs": torch.cat(log_probs)}
        if keep_steps:
            record |= {"mean": torch.cat(means), "std_dev_t": torch.cat(stds)}
        gathered = to_host(record)
        old = {k: v for k, v in gathered.items() if k != "log_probs"}
        return gathered["log_probs"], old

    def run(
        self,
        batch: RolloutBatch,
        advantages: torch.Tensor,
        extras: Mapping[str, torch.Tensor],
        *,
        generator: torch.Generator,
        shard: Shard | None = None,
        behaviour: AbstractContextManager[Any] | None = None,
    ) -> UpdateStats:
        """One step's update; returns this worker's :class:`UpdateStats` (the driver merges workers), with the
        rollout correction's diagnostic sums in ``rollout_corr`` when both log-probs exist.

        ``batch``, ``advantages`` and ``extras`` are host records; each micro-batch crosses to the device once.
        ``behaviour``: a context in which the model holds the weights version that sampled the batch (a stale
        batch, ``[run] max_staleness``), for the old log-probs' recompute; None: the weights as they are."""
        traj = batch.trajectory
        if traj is None:
            raise RuntimeError("the rollout recorded no trajectory but the loss needs per-step log-probs")
        self._guidance = traj.guidance_scale
        w = traj.log_probs.shape[1]
        shard = shard or Shard.whole(batch.group_ids.tolist())
        self._resolve_micro_batch(batch, len(shard.sample_ids))
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
                    micro = to_device(
                        trajectory_micro_batch(
                            batch,
                            idx,
                            advantages=advantages,
                            extras=extras,
                            old_log_probs=old_log_probs,
                            old_steps=old_steps,
                            weights=sample_weights,
                        ),
                        device,
                    )
                    for j in range(w):
                        current = self._step(micro, j, grad=True)
                        reference = self._step(micro, j, grad=False, reference=True) if ("reference" in views) else None
                        old = None
                        if "old" in views:
                            old = SamplerStep(
                                sample=micro.next_latents[:, j],
                                mean=micro.old_mean[:, j],
                                std_dev_t=micro.old_std[:, j],
                                log_prob=micro.old_log_probs[:, j],
                            )
                        inputs = TrajectoryLossInputs(
                            current=current,
                            old_log_prob=micro.old_log_probs[:, j],
                            advantages=micro.advantages,
                            old=old,
                            reference=reference,
                            sigmas=micro.sigmas[:, j],
                            next_sigmas=micro.next_sigmas[:, j],
                            extras=micro.extras,
                            step_indices=micro.step_indices[:, j],
                            weights=None if micro.weights is None else micro.weights[:, j],
                            window_position=j,
                        )
                        out = self.loss(inputs)
                        self.stepper.backward(out.loss, weight)
                        if real:
                            stats.add_loss(float(out.loss.detach()), weight, out.metrics, len(idx), out.metric_counts)
                stats.record_step(self.stepper.step())
        out = self.auto_micro.report(stats)
        if diagnostics:
            out.rollout_corr = diagnostics
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
        rollout = to_host(traj.log_probs).float()
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
