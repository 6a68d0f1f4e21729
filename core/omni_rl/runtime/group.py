"""The worker group: N policy-worker Ray actors placed with a placement group, one torch.distributed group.

The driver talks to the group, never to single actors: a rollout is split by whole prompt groups and the shards
are concatenated back in order; the update sends each worker its samples' advantages and global ids; every
other call (save, load, shutdown) goes to all workers. A dead worker becomes an error naming its rank.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import RolloutRequest
from omni_rl.runtime.sharding import split_groups
from omni_rl.schema import ResolvedConfig

PLACEMENT_TIMEOUT_S = 120


class WorkerGroup:
    def __init__(self, config: ResolvedConfig, on_error_hint: Callable[[], str]) -> None:
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from omni_rl.runtime.worker import PolicyWorker

        cluster = config.cluster
        self.size = cluster.workers
        #: FSDP2: every forward is a collective, so every worker samples the same number of samples
        self.lockstep = cluster.strategy == "fsdp2"
        self.hint = on_error_hint
        bundle: dict[str, float] = {"CPU": cluster.cpus_per_worker}
        if cluster.gpus_per_worker:
            bundle["GPU"] = cluster.gpus_per_worker
        self.placement = placement_group([dict(bundle) for _ in range(self.size)], strategy="PACK")
        ready, _ = ray.wait([self.placement.ready()], timeout=PLACEMENT_TIMEOUT_S)
        if not ready:
            ray.util.remove_placement_group(self.placement)
            raise RuntimeFailure(
                f"the Ray cluster could not place {self.size} worker(s) of {bundle} within {PLACEMENT_TIMEOUT_S} s "
                f"(cluster has {ray.cluster_resources()}, free {ray.available_resources()})",
                hint="lower [cluster] workers / cpus_per_worker / gpus_per_worker, or add nodes",
            )
        actor_cls = ray.remote(num_cpus=cluster.cpus_per_worker, num_gpus=cluster.gpus_per_worker)(PolicyWorker)
        self.actors = [
            actor_cls.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(self.placement, placement_group_bundle_index=rank)
            ).remote(config, rank, self.size)
            for rank in range(self.size)
        ]
        try:
            self.infos = self.call("ready")
            if self.size > 1 or self.lockstep:  # FSDP2 shards over a process group, even one of 1
                endpoint = self._get(self.actors[0].dist_endpoint.remote(), "starting torch.distributed", rank=0)
                self._gather([a.init_distributed.remote(endpoint) for a in self.actors], "joining torch.distributed")
        except BaseException:
            self.shutdown()
            raise

    # -- calls -------------------------------------------------------------------------------------------------
    def _get(self, ref: Any, what: str, rank: int) -> Any:
        import ray

        try:
            return ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            raise RuntimeFailure(f"policy worker {rank} died while {what}: {exc}", hint=self.hint()) from exc

    def _gather(self, refs: Sequence[Any], what: str) -> list[Any]:
        return [self._get(ref, what, rank) for rank, ref in enumerate(refs)]

    def call(self, method: str, *args: Any) -> list[Any]:
        """The same call on every worker; results in rank order."""
        return self._gather([getattr(a, method).remote(*args) for a in self.actors], method.replace("_", " "))

    def rollout(self, request: RolloutRequest) -> dict[str, Any]:
        """Split by whole groups, sample on every worker at once, concatenate in the request's order.

        Under FSDP2 every worker runs the same number of samples: shorter shards (validation) are padded with
        copies of a sample, which the worker drops."""
        import attrs

        shards = split_groups(request.group_ids, self.size)
        longest = max(len(positions) for positions in shards)
        refs, used = [], []
        for actor, positions in zip(self.actors, shards, strict=True):
            if not positions and not self.lockstep:
                continue
            run = list(positions)
            if self.lockstep:
                run += [positions[-1] if positions else 0] * (longest - len(positions))
            sub = attrs.evolve(
                request,
                prompts=[request.prompts[i] for i in run],
                group_ids=[request.group_ids[i] for i in run],
                seeds=[request.seeds[i] for i in run],
                metadata=[request.metadata[i] for i in run] if request.metadata else [],
            )
            refs.append(actor.rollout_shard.remote(sub, len(positions)))
            used.append(positions)
        parts = self._gather(refs, "sampling")
        order = np.concatenate([np.asarray(p) for p in used])
        if not np.array_equal(order, np.arange(len(request.prompts))):
            raise AssertionError("worker shards must be contiguous runs of the request")
        self.shards = shards
        return {
            "images": np.concatenate([p["images"] for p in parts]),
            "prompts": [q for p in parts for q in p["prompts"]],
            "group_ids": np.concatenate([p["group_ids"] for p in parts]),
        }

    def update(
        self,
        advantages: np.ndarray,
        extras: dict[str, np.ndarray],
        step: int,
        rewards: np.ndarray,
        group_ids: Sequence[int],
    ) -> list[dict[str, Any]]:
        """Every worker updates on the samples it holds; gradients are summed inside the process group."""
        refs = []
        for actor, positions in zip(self.actors, self.shards, strict=True):
            idx = np.asarray(positions, dtype=np.int64)
            refs.append(
                actor.update.remote(
                    advantages[idx],
                    {k: v[idx] for k, v in extras.items()},
                    step,
                    rewards[idx],
                    [int(i) for i in idx],
                    list(group_ids),
                )
            )
        return self._gather(refs, f"updating (step {step})")

    def shutdown(self) -> None:
        """Leave the process group where possible, then kill every actor and free the placement group.

        Never raises: it also runs on the error path, where a worker may already be dead."""
        import ray

        try:
            self.call("shutdown")
        except RuntimeFailure:
            pass
        finally:
            for actor in self.actors:
                ray.kill(actor)
            ray.util.remove_placement_group(self.placement)
