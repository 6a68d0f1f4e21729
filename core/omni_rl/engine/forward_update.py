"""The update for forward-process losses (Diffusion-DPO, DiffusionNFT, AWM).

These losses train on the rollout's clean x0 re-noised at timesteps the loss draws, instead of per-step SDE
log-probs. The engine owns the batching (mini-batches for optimizer steps, micro-batches for memory, whole prompt
groups when the loss pairs samples), the per-sample generators the loss draws t and noise from, the policy views
(current with gradients; old / ema adapters and the reference without), gradient accumulation, clipping and the
optimizer step, and calls the loss's hooks: ``after_optimizer_step`` after every optimizer step and
``after_update`` once after the step's whole update (DiffusionNFT refreshes its old adapter in one of them).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from typing import Any

import torch

from omni_rl.batch import ForwardLossInputs, RolloutBatch
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.auto_micro_batch import AutoMicroBatch, backward_probe
from omni_rl.engine.micro_batch import forward_micro_batch
from omni_rl.engine.placement import to_device
from omni_rl.engine.sharding import Shard, pack
from omni_rl.engine.stepping import GradSync, Lockstep, OptimizerStepper, UpdateStats, took_step
from omni_rl.protocols import DiffusionModel, Loss
from omni_rl.seeding import keyed_generator


def sample_generators(
    seed: int, step: int, epoch: int, sample_ids: list[int], k: int, salt: int = 7_777
) -> list[torch.Generator]:
    """One generator per sample, keyed by its global id: draws do not depend on batching or worker count.
    ``salt`` separates independent streams for the same (sample, timestep index)."""
    return [keyed_generator(seed, step, epoch, i, k, salt) for i in sample_ids]


def view_context(model: DiffusionModel, view: str) -> Any:
    if view == "current":
        return nullcontext()
    if view == "reference":
        return model.disable_adapters()
    use_adapter = getattr(model, "use_adapter", None)
    if use_adapter is None:
        raise RuntimeError(f"the loss needs the {view!r} policy view, but the model has no named adapters")
    return use_adapter(view)


class ForwardUpdate:
    """One training step's update for losses with ``requirements.inputs == "forward"``."""

    def __init__(
        self,
        model: DiffusionModel,
        loss: Loss,
        optimizer: torch.optim.Optimizer,
        optim: OptimConfig,
        seed: int,
        grad_sync: GradSync | None = None,
        lockstep: Lockstep | None = None,
    ) -> None:
        self.model = model
        self.loss = loss
        self.optimizer = optimizer
        #: ``[optim]`` with ``micro_batch = "auto"`` resolved for the batch being updated (as configured otherwise)
        self.optim = optim
        self.auto_micro = AutoMicroBatch(optim)
        self.seed = seed
        self.stepper = OptimizerStepper(optimizer, optim, grad_sync)
        #: FSDP2: every worker runs as many micro-batch passes as the busiest one (padding passes weigh 0)
        self.lockstep = lockstep
        #: optimizer steps taken over the run (the ``update_index`` of the loss hooks); checkpointed
        self.updates_done = 0

    def state_dict(self) -> dict[str, int]:
        return {"updates_done": self.updates_done}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.updates_done = int(state["updates_done"])

    def run(
        self,
        batch: RolloutBatch,
        rewards: torch.Tensor,
        advantages: torch.Tensor,
        extras: Mapping[str, torch.Tensor],
        *,
        step: int,
        generator: torch.Generator,
        shard: Shard | None = None,
    ) -> UpdateStats:
        """One step's update; returns this worker's :class:`UpdateStats` (the driver merges workers). ``batch``,
        ``rewards``, ``advantages`` and ``extras`` are host records; each micro-batch crosses to the device once."""
        req = self.loss.requirements
        device = self.model.device
        shard = shard or Shard.whole(batch.group_ids.tolist())
        stats = UpdateStats()
        before = getattr(self.loss, "before_update", None)
        if before is not None:
            before(self.model, step)
        after_step = getattr(self.loss, "after_optimizer_step", None)
        # images (N, H, W, 3) or video frames (N, F, H, W, 3)
        height, width = int(batch.images.shape[-3]), int(batch.images.shape[-2])

        def sigma_schedule(num_steps: int) -> torch.Tensor:
            return self.model.sigma_schedule(num_steps, height, width)

        self._resolve_micro_batch(batch, len(shard.sample_ids))
        held = set(shard.sample_ids)
        filler = (pack(shard.units(list(shard.sample_ids), req.batch_unit), self.optim.micro_batch) or [[]])[0]
        for epoch in range(self.optim.epochs):
            minis = shard.minibatches(generator, self.optim.mini_batch, req.batch_unit)
            plans = [
                pack(shard.units([i for i in mini if i in held], req.batch_unit), self.optim.micro_batch)
                for mini in minis
            ]
            rounds = self.lockstep([len(p) for p in plans]) if self.lockstep else [len(p) for p in plans]
            for mini, micro_batches, count in zip(minis, plans, rounds, strict=True):
                self.stepper.zero_grad()
                # padding passes (FSDP2 only): a real micro-batch of this worker's, weighted 0 and not counted
                passes = [(ids, True) for ids in micro_batches] + [(filler, False)] * (count - len(micro_batches))
                for ids, real in passes:
                    idx = shard.local_positions(ids)
                    micro = to_device(
                        forward_micro_batch(batch, idx, advantages=advantages, rewards=rewards, extras=extras), device
                    )
                    cond = micro.conditioning
                    weight = len(idx) / (len(mini) * req.timesteps) if real else 0.0

                    def velocity(
                        view: str,
                        x_t: torch.Tensor,
                        sigma: torch.Tensor,
                        samples: torch.Tensor | None = None,
                        _cond: Any = cond,
                    ) -> torch.Tensor:
                        # ``samples`` indexes the micro-batch when x_t holds a subset (DPO forwards only the
                        # pairs of a group) or repeats; the conditioning follows it.
                        sample_cond = _cond if samples is None else _cond.index(samples)
                        if view == "current":
                            return self.model.predict_velocity(x_t, sigma, sample_cond, 1.0)
                        with torch.no_grad(), view_context(self.model, view):
                            return self.model.predict_velocity(x_t, sigma, sample_cond, 1.0)

                    for k in range(req.timesteps):
                        inputs = ForwardLossInputs(
                            x0=micro.x0,
                            advantages=micro.advantages,
                            rewards=micro.rewards,
                            group_ids=micro.group_ids,
                            generators=sample_generators(self.seed, step, epoch, ids, k),
                            velocity=velocity,
                            timestep_index=k,
                            extras=micro.extras,
                            epoch_generators=sample_generators(self.seed, step, epoch, ids, 0, salt=7_778),
                            sigma_schedule=sigma_schedule,
                        )
                        out = self.loss(inputs)
                        self.stepper.backward(out.loss, weight)
                        if real:
                            stats.add_loss(float(out.loss.detach()), weight, out.metrics, len(idx), out.metric_counts)
                grad_norm = self.stepper.step()
                stats.record_step(grad_norm)
                if took_step(grad_norm):
                    self.updates_done += 1
                    if after_step is not None:
                        after_step(self.model, self.updates_done)
        after_update = getattr(self.loss, "after_update", None)
        if after_update is not None:
            after_update(self.model, self.updates_done)
        return self.auto_micro.report(stats)

    def _resolve_micro_batch(self, batch: RolloutBatch, samples: int) -> None:
        """``[optim] micro_batch = "auto"``: probe the largest micro-batch that fits, as one trained velocity
        forward + backward of ``b`` samples at mid-schedule with a no-grad forward beside it (the reference or old
        view that DPO, DiffusionNFT and AWM forward next to the trained one)."""
        if not self.auto_micro.auto:
            return
        device = self.model.device

        def try_size(b: int) -> None:
            idx = torch.arange(b)
            # the probe's micro-batch crosses to the device whole, as the update's do
            probe = to_device({"x0": batch.final_latents[idx], "cond": batch.conditioning.index(idx)}, device)
            x, cond = probe["x0"], probe["cond"]
            sigma = torch.full((b,), 0.5, device=device)
            backward_probe(
                lambda: self.model.predict_velocity(x, sigma, cond, 1.0),
                lambda: self.model.predict_velocity(x, sigma, cond, 1.0),
            )

        shape = tuple(batch.final_latents.shape[1:])
        self.optim = self.auto_micro.optim_for(self.model, shape, samples, try_size)
