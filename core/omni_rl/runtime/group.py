"""The worker group: N policy-worker Ray actors placed with a placement group, one torch.distributed group.

The driver talks to the group, never to single actors: a rollout is split by whole prompt groups and the shards
are concatenated back in order; the update sends each worker its samples' advantages and global ids; every
other call (save, load, shutdown) goes to all workers.

A dead worker becomes an error naming its rank and the resume command, never a hang. The driver waits on every
worker's call at once (``ray.wait``): Ray fails a call of an actor as soon as it marks the actor dead, so the dead
rank's own call is the liveness check, and it arrives even while the survivors sit in a collective waiting for it
(those would otherwise wait out the process-group timeout). When a survivor's call fails first (its collective
broke when the peer vanished, a ``RayTaskError``), the driver gives the others a short grace period to show which
of them died before it reports the error as it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from omni_rl.config.schema import ResolvedConfig
from omni_rl.engine.sharding import split_groups
from omni_rl.errors import OmniRLError, RuntimeFailure
from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.runtime.cluster import worker_bundle, worker_env
from omni_rl.runtime.faults import clean_line, describe_remote, remote_cause, startup_error

if TYPE_CHECKING:
    from omni_rl.engine.stepping import UpdateStats

PLACEMENT_TIMEOUT_S = 120
#: ``stream(request, parts) -> handle``: told each sampling worker's (positions in the request, Ray ref of its
#: rollout output) the moment a training rollout is submitted, so that its images can be scored while other parts
#: still sample ([run] stream_rewards); the handle travels with the rollout's output
StreamParts = Callable[[RolloutRequest, list[tuple[list[int], Any]]], Any]
#: after one worker's call fails, how long the driver waits for the others' calls to show which workers died: a
#: killed process shows within a second, a lost node within Ray's node health check (about 15 s by default)
FAILURE_GRACE_S = 30.0
#: once a dead worker is known, how long to collect others dying with it (several workers on one lost node)
SIBLING_DEATH_S = 1.0
#: how long the workers get to leave the process group at shutdown before they are killed anyway (a survivor of
#: a dead peer may be stuck in a collective and never answer)
SHUTDOWN_TIMEOUT_S = 10.0


def with_absolute_output_dir(config: ResolvedConfig) -> ResolvedConfig:
    """The config with ``[run] output_dir`` made absolute against the driver's working directory: a worker on
    another node would resolve a relative path in its own working directory (the path must be shared storage,
    mounted at the same place on every node)."""
    import attrs

    absolute = str(Path(config.run.output_dir).expanduser().absolute())
    if absolute == config.run.output_dir:
        return config
    return attrs.evolve(config, file=attrs.evolve(config.file, run=attrs.evolve(config.run, output_dir=absolute)))


class WorkerGroup:
    #: what the errors call one of this group's actors (the rollout group says "rollout worker")
    role = "policy worker"

    def __init__(self, config: ResolvedConfig, on_error_hint: Callable[[], str]) -> None:
        from omni_rl.runtime.worker import PolicyWorker

        config = with_absolute_output_dir(config)
        cluster = config.cluster
        self.size = cluster.workers
        #: FSDP2: every forward is a collective, so every worker samples the same number of samples
        self.lockstep = cluster.strategy == "fsdp2"
        self.hint = on_error_hint
        self._place(
            PolicyWorker,
            config,
            worker_bundle(cluster),
            (self.size,),
            "lower [cluster] workers / cpus_per_worker / gpus_per_worker, or add nodes",
        )
        try:
            self.infos = self.call("ready")
            if self.size > 1 or self.lockstep:  # FSDP2 shards over a process group, even one of 1
                endpoint = self._get(self.actors[0].dist_endpoint.remote(), "starting torch.distributed", rank=0)
                self._gather([a.init_distributed.remote(endpoint) for a in self.actors], "joining torch.distributed")
        except BaseException:
            self.shutdown()
            raise

    def _place(
        self, worker_cls: type, config: ResolvedConfig, bundle: dict[str, float], args: tuple[Any, ...], hint: str
    ) -> None:
        """Reserve one ``bundle`` per worker (a placement group, packed), then start ``self.size`` actors
        ``worker_cls(config, rank, *args)`` in it; a cluster that cannot place them within
        :data:`PLACEMENT_TIMEOUT_S` is a RuntimeFailure with ``hint``."""
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        self.placement = placement_group([dict(bundle) for _ in range(self.size)], strategy="PACK")
        ready, _ = ray.wait([self.placement.ready()], timeout=PLACEMENT_TIMEOUT_S)
        if not ready:
            ray.util.remove_placement_group(self.placement)
            raise RuntimeFailure(
                f"the Ray cluster could not place {self.size} {self.role}(s) of {bundle} within "
                f"{PLACEMENT_TIMEOUT_S} s (cluster has {ray.cluster_resources()}, free {ray.available_resources()})",
                hint=hint,
            )
        actor_cls = ray.remote(num_cpus=bundle["CPU"], num_gpus=bundle.get("GPU", 0))(worker_cls)
        self.actors = [
            actor_cls.options(
                scheduling_strategy=PlacementGroupSchedulingStrategy(self.placement, placement_group_bundle_index=rank),
                # this run's worker settings also when it joined a Ray started elsewhere (a test session's)
                runtime_env={"env_vars": worker_env()},
            ).remote(config, rank, *args)
            for rank in range(self.size)
        ]

    # -- calls -------------------------------------------------------------------------------------------------
    def _get(self, ref: Any, what: str, rank: int) -> Any:
        return self._gather({rank: ref}, what)[0]

    def _gather(self, refs: Sequence[Any] | Mapping[int, Any], what: str) -> list[Any]:
        """The results of one call per worker (``refs`` in rank order, or by rank), in rank order.

        Waits on all of them at once, so that a dead worker is seen at once whichever rank it is; see the module
        docstring for how a failure becomes an error naming the dead workers."""
        import ray

        by_rank = dict(refs) if isinstance(refs, Mapping) else dict(enumerate(refs))
        pending = {ref: rank for rank, ref in by_rank.items()}
        results: dict[int, Any] = {}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                rank = pending.pop(ref)
                try:
                    results[rank] = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    self._fail(rank, exc, what, pending)
        return [results[rank] for rank in sorted(by_rank)]

    def _fail(self, rank: int, exc: BaseException, what: str, pending: dict[Any, int]) -> NoReturn:
        """Raise for the failed call of worker ``rank``: a RuntimeFailure naming every worker found dead, or,
        when none died, the worker's own error as one line naming the worker and the operation (:func:`_named`)."""
        import ray

        started = startup_error(exc, f"{self.role} {rank}")
        if started is not None:  # its constructor raised (a wrong model path): the cause, not "it died"
            raise started from exc
        dead = {rank: _reason(exc)} if _is_death(exc) else {}
        deadline = time.monotonic() + (SIBLING_DEATH_S if dead else FAILURE_GRACE_S)
        while pending and (remaining := deadline - time.monotonic()) > 0:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=remaining)
            for ref in ready:
                other = pending.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayError as other_exc:
                    if _is_death(other_exc):
                        if not dead:
                            deadline = time.monotonic() + SIBLING_DEATH_S
                        dead[other] = _reason(other_exc)
        if not dead:
            raise _named(rank, exc, what, self.hint(), self.role) from exc
        ranks = sorted(dead)
        names = ", ".join(self._describe(r) for r in ranks)
        subject = f"{self.role} {names}" if len(ranks) == 1 else f"{self.role}s {names}"
        survivor = "" if rank in dead else f"; worker {rank}'s call failed with it"
        raise RuntimeFailure(f"{subject} died while {what}: {dead[ranks[0]]}{survivor}", hint=self.hint()) from exc

    def _describe(self, rank: int) -> str:
        """``1 (pid 1234 on node-b)`` (the host name) once the workers have reported where they run, else ``1``."""
        info = getattr(self, "infos", None)
        if not info:
            return str(rank)
        where = f" on {info[rank]['node']}" if info[rank].get("node") else ""
        return f"{rank} (pid {info[rank]['pid']}{where})"

    def call(self, method: str, *args: Any) -> list[Any]:
        """The same call on every worker; results in rank order."""
        what = _OPERATIONS.get(method, method.replace("_", " "))
        if method in ("save_state", "load_state") and args:
            what = f"{what} {args[0]}"
        return self._gather([getattr(a, method).remote(*args) for a in self.actors], what)

    def rollout(self, request: RolloutRequest, stream: StreamParts | None = None) -> RolloutOutcome:
        """Split by whole groups, sample on every worker at once, concatenate in the request's order.

        Under FSDP2 every worker runs the same number of samples: shorter shards (validation) are padded with
        copies of a sample, which the worker drops. ``window`` is the training rollout's SDE window (schedule
        step indices, empty when none was recorded), which every worker must have drawn alike.

        ``stream``: called with the request and each sampling worker's (positions, Ray ref of its output) as
        soon as they are submitted (the reward actors then score each shard as it is ready); what it returns is
        ``streamed`` of the outcome."""
        shards = split_groups(request.group_ids, self.size)
        longest = max(len(positions) for positions in shards)
        refs: dict[int, Any] = {}
        used = []
        for rank, (actor, positions) in enumerate(zip(self.actors, shards, strict=True)):
            if not positions and not self.lockstep:
                continue
            run = list(positions)
            if self.lockstep:
                run += [positions[-1] if positions else 0] * (longest - len(positions))
            refs[rank] = actor.rollout_shard.remote(request.select(run), len(positions))
            used.append(positions)
        streamed = (
            None if stream is None else stream(request, [(p, refs[r]) for r, p in zip(refs, used, strict=True) if p])
        )
        parts = self._gather(refs, f"sampling (step {request.step})" if request.step >= 0 else "sampling (validation)")
        order = np.concatenate([np.asarray(p) for p in used])
        if not np.array_equal(order, np.arange(len(request.prompts))):
            raise AssertionError("worker shards must be contiguous runs of the request")
        self.shards = shards
        out = RolloutOutcome.join(parts)
        out.streamed = streamed
        return out

    def update(
        self,
        advantages: np.ndarray,
        extras: dict[str, np.ndarray],
        step: int,
        rewards: np.ndarray,
        group_ids: Sequence[int],
    ) -> list[UpdateStats]:
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

        Never raises and never hangs: it also runs on the error path, where a worker may be dead and a survivor
        stuck in a collective waiting for it (that one is killed after :data:`SHUTDOWN_TIMEOUT_S`)."""
        import ray

        try:
            refs = [actor.shutdown.remote() for actor in self.actors]
            ray.wait(refs, num_returns=len(refs), timeout=SHUTDOWN_TIMEOUT_S)
        finally:
            for actor in self.actors:
                ray.kill(actor)
            ray.util.remove_placement_group(self.placement)


#: what each call is doing, as the errors say it
_OPERATIONS = {"ready": "starting", "save_state": "saving the checkpoint", "load_state": "loading the checkpoint"}


def _named(rank: int, exc: BaseException, what: str, hint: str, role: str = "policy worker") -> OmniRLError:
    """A live worker's failed call as one line: ``policy worker N failed while <what>: Type: message``. An
    omni-rl error raised in the worker (a damaged checkpoint, a bad option) keeps its class, attributes and hint,
    with the worker and the operation put in front of its message."""
    cause = remote_cause(exc)
    if isinstance(cause, OmniRLError):
        cause.message = f"{role} {rank} failed while {what}: {cause.message}"
        cause.args = (cause.message,)
        return cause
    return RuntimeFailure(f"{role} {rank} failed while {what}: {describe_remote(exc)}", hint=hint)


def _is_death(exc: BaseException) -> bool:
    """Whether a failed call means its worker process is gone (killed, crashed, out of memory, node lost)."""
    import ray

    errors = ray.exceptions
    return isinstance(exc, errors.RayActorError | errors.WorkerCrashedError | errors.OutOfMemoryError) or (
        isinstance(exc, errors.RayTaskError) and isinstance(exc.cause, errors.RayActorError)
    )


def _reason(exc: BaseException) -> str:
    """The first line of a Ray error (the rest is Ray's long explanation and the remote traceback)."""
    return clean_line(str(exc)) or type(exc).__name__
