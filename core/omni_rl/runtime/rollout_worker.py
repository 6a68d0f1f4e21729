"""The rollout worker (``[cluster] rollout_workers > 0``): a Ray actor apart from the policy workers, holding a
no-grad copy of the model and running the rollout backend with the weights version it last received.

It returns two things per training rollout: what the driver needs (uint8 images, the SDE window, the weights
version it sampled with) and the whole :class:`~omni_rl.batch.RolloutBatch` as a second Ray object, which the
policy workers fetch straight from the object store (the driver never holds the trajectory).

A backend that serves the model from its own engine (vLLM-Omni) has the optional member ``load_weights(state,
version)`` (docs/hooks.md): the worker then hands it every new version and does not touch its own model copy.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from omni_rl.config.schema import ResolvedConfig
from omni_rl.context import BuildContext
from omni_rl.engine import placement_guard
from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.runtime.weights import WeightsState, apply
from omni_rl.runtime.worker import build_sampling_parts, limit_torch_threads, pick_device, process_info, sample


class RolloutWorker:
    """Samples training batches with a received weights version. Methods are called through Ray (or directly).

    It builds the model, sampler, rollout backend and the loss's adapters exactly as a policy worker does
    (:func:`~omni_rl.runtime.worker.build_sampling_parts`) and samples through the same call
    (:func:`~omni_rl.runtime.worker.sample`), without the optimizer."""

    def __init__(self, config: ResolvedConfig, rank: int = 0) -> None:
        import torch

        self.config = config
        self.rank = rank
        torch.manual_seed(config.run.seed + 10_000 + rank)
        limit_torch_threads()
        gpus = config.cluster.rollout_gpus_per_worker
        gpus = config.cluster.gpus_per_worker if gpus is None else gpus
        self.ctx = BuildContext(
            device=pick_device(gpus), seed=config.run.seed, run_dir=Path(config.run.output_dir), rank=rank
        )
        self.model, self.sampler, self.rollout, loss = build_sampling_parts(config, self.ctx)
        placement_guard.mark_module(self.model)
        self.rollout_view = loss.requirements.rollout_view
        #: the weights version held; None until the first :meth:`load_weights`
        self.version: int | None = None

    def ready(self) -> dict[str, Any]:
        return process_info(self.ctx.device)

    def load_weights(self, state: WeightsState) -> dict[str, float]:
        """Take a new weights version (the backend's own ``load_weights`` when it has one); returns the seconds it
        took, for the driver's ``perf/weight_sync_s``."""
        start = time.perf_counter()
        load = getattr(self.rollout, "load_weights", None)
        if load is not None:
            load(state, state.version)
        else:
            apply(self.model, state)
        self.version = state.version
        return {"load_s": time.perf_counter() - start}

    @placement_guard.guard_method
    def generate(self, request: RolloutRequest) -> tuple[RolloutOutcome, Any]:
        """(what the driver needs, the whole batch): call with ``num_returns=2``."""
        if self.version is None:
            raise RuntimeError("rollout worker asked to sample before it received any weights")
        batch, window = sample(self.model, self.sampler, self.rollout, self.rollout_view, request)
        out = RolloutOutcome(
            images=batch.images.numpy(),
            prompts=batch.prompts,
            group_ids=batch.group_ids.numpy(),
            window=list(window),
            version=self.version,
        )
        return out, batch

    def shutdown(self) -> None:
        """Nothing to leave (no process group); the driver kills the actor."""
