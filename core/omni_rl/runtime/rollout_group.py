"""The rollout workers as one group (``[cluster] rollout_workers = N``), beside the policy workers' group.

A step's request is split by whole prompt groups over the rollout workers; each returns the driver's part (images,
window, the weights version it sampled with) and its whole batch as a second Ray object, which only the policy
workers holding those samples fetch. Weights travel the same way: the policy's rank 0 returns a version as one
object in Ray's object store, and every rollout worker gets that same object (one put, many gets).

Errors name the rollout worker and the resume command exactly as the policy group does (it is a WorkerGroup with
another role).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from omni_rl.config.schema import ResolvedConfig
from omni_rl.engine.sharding import split_groups
from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.runtime.cluster import worker_bundle
from omni_rl.runtime.group import WorkerGroup, with_absolute_output_dir


@attrs.frozen
class Pending:
    """A submitted rollout: its request, each used worker's (positions, driver ref, batch ref)."""

    request: RolloutRequest
    parts: list[tuple[int, list[int], Any, Any]]


class RolloutGroup(WorkerGroup):
    role = "rollout worker"

    def __init__(self, config: ResolvedConfig, on_error_hint: Callable[[], str]) -> None:
        from omni_rl.runtime.rollout_worker import RolloutWorker

        config = with_absolute_output_dir(config)
        self.size = config.cluster.rollout_workers
        self.lockstep = False
        self.hint = on_error_hint
        self._place(
            RolloutWorker,
            config,
            worker_bundle(config.cluster, rollout=True),
            (),
            "lower [cluster] rollout_workers / rollout_cpus_per_worker / rollout_gpus_per_worker",
        )
        try:
            self.infos = self.call("ready")
        except BaseException:
            self.shutdown()
            raise

    def submit(self, request: RolloutRequest) -> Pending:
        """Start sampling ``request`` split over the rollout workers; returns at once."""
        parts = []
        for rank, positions in enumerate(split_groups(request.group_ids, self.size)):
            if not positions:
                continue
            out_ref, batch_ref = self.actors[rank].generate.options(num_returns=2).remote(request.select(positions))
            parts.append((rank, list(positions), out_ref, batch_ref))
        return Pending(request=request, parts=parts)

    def collect(self, pending: Pending) -> RolloutOutcome:
        """Wait for a submitted rollout: the driver's part, joined in the request's order, with ``version``."""
        step = pending.request.step
        outs = self._gather({rank: ref for rank, _, ref, _ in pending.parts}, f"sampling (step {step})")
        return RolloutOutcome.join(outs)

    def hand_over(self, pending: Pending, policy: WorkerGroup, version: int) -> None:
        """Give each policy worker its shard of the sampled batch (by whole groups, as a colocated rollout splits
        it); each fetches only the rollout workers' batches that hold its samples."""
        request = pending.request
        shards = split_groups(request.group_ids, policy.size)
        owner = {}  # global position -> (part index, position inside that part)
        for k, (_, positions, _, _) in enumerate(pending.parts):
            owner.update({p: (k, i) for i, p in enumerate(positions)})
        refs = {}
        for rank, (actor, positions) in enumerate(zip(policy.actors, shards, strict=True)):
            used = sorted({owner[p][0] for p in positions})
            offsets = {k: sum(len(pending.parts[u][1]) for u in used[: used.index(k)]) for k in used}
            local = [offsets[owner[p][0]] + owner[p][1] for p in positions]
            batch_refs = [pending.parts[k][3] for k in used]
            refs[rank] = actor.accept_rollout.remote(request, version, local, *batch_refs)
        policy._gather(refs, f"receiving the rollout (step {request.step})")
        policy.shards = shards
