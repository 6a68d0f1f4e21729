"""Where a training step's batch comes from: the policy workers themselves (colocated, the default), or the
rollout workers with weights sync and, at ``[run] max_staleness = 1``, one batch sampled ahead.

One-step-off: right after step t's batch is handed to the policy workers, step t+1's request is drawn and
submitted, so the rollout workers sample it while step t trains; the new weights (version t) reach them after
that rollout (Ray runs an actor's calls in order), so batch t+1 is sampled with version t-1. A step then costs
about max(rollout, update) instead of their sum.

Checkpoints and resume: the in-flight batch is not saved. A checkpoint after step t keeps the weights version that
sampled it (t-1) and the prompt sampler's position before its draw; a resumed run loads that version into the
rollout workers, re-samples the same prompts with the same seeds (deterministically, so the same batch), then
sends version t, exactly as the uninterrupted run did.

Streaming rewards (``stream``, see :data:`omni_rl.runtime.group.StreamParts`): each source tells it a training
batch's parts the moment they are submitted, so the reward actors score a worker's part as soon as it is sampled;
at max_staleness = 1 that is while the previous step trains. The handle it returns is the output's ``streamed``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.runtime.group import StreamParts, WorkerGroup
from omni_rl.runtime.rollout_group import Pending, RolloutGroup

#: ``make(step) -> (records, request)``: draws a step's prompts and builds its request
MakeRequest = Callable[[int], tuple[list[Any], RolloutRequest]]


class ColocatedRollouts:
    """The policy workers sample their own shards (no weights to move)."""

    def __init__(self, policy: WorkerGroup, stream: StreamParts | None = None) -> None:
        self.policy = policy
        self.stream = stream

    def start(self, version: int, checkpoint: Path | None, make: MakeRequest, last_step: int) -> None:
        """Nothing to prepare."""

    def take(self, step: int, make: MakeRequest) -> tuple[list[Any], RolloutRequest, RolloutOutcome]:
        records, request = make(step)
        if self.stream is None:  # the plain call: stand-in groups in tests take only the request
            return records, request, self.policy.rollout(request)
        return records, request, self.policy.rollout(request, stream=self.stream)

    def after_update(self, step: int, make: MakeRequest, last_step: int) -> dict[str, float]:
        """No weights to send."""
        return {}

    def prompt_state(self) -> dict[str, Any] | None:
        return None

    def in_flight_versions(self, step: int) -> list[int]:
        """Nothing is sampled ahead."""
        return []


class DisaggregatedRollouts:
    """Rollout workers sample; the policy's weights reach them after every update (see the module docstring)."""

    def __init__(
        self,
        policy: WorkerGroup,
        rollout: RolloutGroup,
        max_staleness: int,
        prompts: Any,
        stream: StreamParts | None = None,
    ) -> None:
        self.policy = policy
        self.rollout = rollout
        self.max_staleness = max_staleness
        self.prompts = prompts
        self.stream = stream
        #: the submitted batch: (step, records, pending, version, the stream's handle of its reward calls)
        self.pending: tuple[int, list[Any], Pending, int, Any] | None = None
        self.loads: list[Any] = []
        self.held = 0  # the version the rollout workers will hold once their queued loads ran
        self.sync = {"bytes": 0.0, "export_s": 0.0, "load_s": 0.0}
        self._prompt_state: dict[str, Any] | None = None
        self.last_step = 0

    # -- weights ---------------------------------------------------------------------------------------------
    def _send(self, exported: list[dict[str, Any]], version: int) -> None:
        """Queue the rollout workers' load of rank 0's exported version (their own order keeps it behind the
        rollouts already submitted)."""
        first = exported[0]
        if first["ref"] is None:
            return
        ref = first["ref"][0]
        self.loads += [a.load_weights.remote(ref) for a in self.rollout.actors]
        self.held = version
        self.sync["bytes"] += float(first["bytes"])
        self.sync["export_s"] += float(first["export_s"])

    def _wait_loads(self) -> None:
        if self.loads:
            loads = self.rollout._gather(self.loads, f"loading weights v{self.held}")
            self.sync["load_s"] = max(float(r["load_s"]) for r in loads)
            self.loads = []

    def start(self, version: int, checkpoint: Path | None, make: MakeRequest, last_step: int) -> None:
        """Send the starting weights; on a one-step-off resume first the version that sampled the in-flight batch,
        and re-sample that batch with it."""
        self.last_step = last_step
        if checkpoint is not None and self.max_staleness:
            older = self.policy.call("load_versions", str(checkpoint), version)
            if older[0]["ref"] is not None and version + 1 <= last_step:
                self._send(older, version - 1)
                self._submit(version + 1, make)
        self._send(self.policy.call("export_weights", version), version)

    def _submit(self, step: int, make: MakeRequest) -> None:
        self._prompt_state = self.prompts.state_dict()
        records, request = make(step)
        pending = self.rollout.submit(request)
        parts = [(positions, out_ref) for _, positions, out_ref, _ in pending.parts]
        streamed = None if self.stream is None else self.stream(request, parts)
        self.pending = (step, records, pending, self.held, streamed)

    # -- steps -----------------------------------------------------------------------------------------------
    def take(self, step: int, make: MakeRequest) -> tuple[list[Any], RolloutRequest, RolloutOutcome]:
        if self.pending is None or self.pending[0] != step:
            self._submit(step, make)
        assert self.pending is not None
        _, records, pending, _, streamed = self.pending
        self.pending = None
        self._prompt_state = None
        out = self.rollout.collect(pending)
        out.streamed = streamed
        self._wait_loads()
        self.rollout.hand_over(pending, self.policy, int(out.version))
        if self.max_staleness and step + 1 <= self.last_step:
            # one-step-off: the next batch samples while this one is scored and trained, with the version the
            # rollout workers hold now (this step's update reaches them after it)
            self._submit(step + 1, make)
        return records, pending.request, out

    def after_update(self, step: int, make: MakeRequest, last_step: int) -> dict[str, float]:
        """Send version ``step`` (queued behind an in-flight rollout). Returns this sync's measures: bytes and
        export seconds, and the load seconds of the latest load that finished (at max_staleness 1 the one of the
        previous update, which overlapped with sampling)."""
        self.sync["bytes"], self.sync["export_s"] = 0.0, 0.0
        self._send(self.policy.call("export_weights", step), step)
        if not self.max_staleness:
            self._wait_loads()  # nothing to overlap with: the next rollout waits for these weights anyway
        return self.sync_metrics()

    def sync_metrics(self) -> dict[str, float]:
        """The last weight sync: bytes sent and seconds spent exporting and loading (the slowest worker's)."""
        return {
            "perf/weight_sync_bytes": self.sync["bytes"],
            "perf/weight_sync_s": self.sync["export_s"] + self.sync["load_s"],
        }

    def prompt_state(self) -> dict[str, Any] | None:
        """The prompt sampler's position before the in-flight batch's draw (None when none is in flight)."""
        return self._prompt_state if self.pending is not None else None

    def in_flight_versions(self, step: int) -> list[int]:
        """The weights version that samples (or, at the run's last step, would sample) batch ``step + 1``: a
        checkpoint keeps it, so that a resumed run, whatever its length, samples as a longer one would have."""
        if not self.max_staleness:
            return []
        return [self.pending[3]] if self.pending is not None else [max(step - 1, 0)]
