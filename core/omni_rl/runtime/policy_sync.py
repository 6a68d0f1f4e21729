"""The policy worker's side of disaggregated rollout (``[cluster] rollout_workers > 0``), as a mixin of
:class:`~omni_rl.runtime.worker.PolicyWorker`: export each weights version for the rollout workers, take its shard
of a batch they sampled, and keep the versions a stale batch (``[run] max_staleness``) may have been sampled with,
to recompute its old log-probs with the weights that sampled it.

The kept versions are part of a checkpoint (``rollout/weights.safetensors`` + ``rollout/versions.json``, written
by rank 0: the DDP replicas hold the same weights), so that a resumed one-step-off run re-samples the in-flight
batch with the version that sampled it before and continues exactly.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from omni_rl.protocols import RolloutRequest
from omni_rl.runtime.weights import WeightsState, capture, swapped

#: where a checkpoint keeps the weights versions of in-flight batches
VERSIONS_DIR = "rollout"


class PolicySync:
    """Mixin: needs ``self.model``, ``self.sampler``, ``self.rank``, ``self.config`` and sets ``self._batch``."""

    model: Any
    sampler: Any
    rank: int
    config: Any
    _batch: Any

    def _sync_state(self) -> dict[str, Any]:
        state = self.__dict__.setdefault("_policy_sync", {"versions": {}, "behaviour": None, "current": 0})
        return state

    def export_weights(self, version: int) -> dict[str, Any]:
        """Snapshot the weights as ``version`` (kept while a stale batch may need it). Rank 0 puts it in Ray's
        object store once and returns ``{"ref": [ref], "bytes", "export_s"}``: the driver passes the reference on
        to every rollout worker without fetching the tensors (a reference inside a list is not resolved)."""
        import time

        start = time.perf_counter()
        sync = self._sync_state()
        sync["current"] = version
        staleness = self.config.run.max_staleness
        if self.rank != 0 and not staleness:
            return self._put(None, start)  # nothing to send and nothing to keep: no copy of the weights
        state = capture(self.model, version)
        if staleness:
            sync["versions"][version] = state
            for old in sorted(sync["versions"])[: -(staleness + 1)]:
                del sync["versions"][old]
        return self._put(state, start)

    def _put(self, state: WeightsState | None, start: float) -> dict[str, Any]:
        import time

        import ray

        if self.rank != 0 or state is None:
            return {"ref": None, "bytes": 0, "export_s": 0.0}
        ref = ray.put(state)
        return {"ref": [ref], "bytes": state.nbytes, "export_s": time.perf_counter() - start}

    def accept_rollout(self, request: RolloutRequest, version: int, positions: list[int], *parts: Any) -> int:
        """Keep this worker's samples (``positions`` into the concatenation of ``parts``, the rollout workers'
        batches holding them) for the update, as :meth:`PolicyWorker.rollout_shard` keeps its own."""
        from omni_rl.engine.batch_parts import concat, select
        from omni_rl.engine.placement import to_host
        from omni_rl.engine.trajectory import keep_trained_steps

        batch = to_host(select(concat(parts), positions))  # host records, whichever process sampled them
        self._batch = keep_trained_steps(batch, self.sampler, request.step, request.run_seed)
        self._sync_state()["behaviour"] = version
        return len(positions)

    def behaviour_weights(self) -> AbstractContextManager[Any] | None:
        """The context holding the weights that sampled the kept batch, when they are not the current ones."""
        sync = self._sync_state()
        version = sync["behaviour"]
        sync["behaviour"] = None
        if version is None or version == sync["current"]:
            return None
        if version not in sync["versions"]:
            raise RuntimeError(
                f"the batch was sampled with weights version {version}, which this worker no longer keeps "
                f"(kept: {sorted(sync['versions'])}, current {sync['current']})"
            )
        return swapped(self.model, sync["versions"][version])

    def save_versions(self, directory: str, versions: list[int]) -> None:
        """Write the kept ``versions`` into the checkpoint directory (rank 0)."""
        from safetensors.torch import save_file

        from omni_rl.rundir import checkpoint

        if self.rank != 0 or not versions:
            return
        root = Path(directory) / VERSIONS_DIR
        root.mkdir(parents=True, exist_ok=True)
        kept = self._sync_state()["versions"]
        tensors = {}
        for v in versions:
            tensors.update({f"v{v}/trainable/{n}": t for n, t in kept[v].trainable.items()})
            tensors.update({f"v{v}/adapters/{n}": t for n, t in kept[v].adapters.items()})
        save_file({k: t.contiguous() for k, t in tensors.items()}, str(root / "weights.safetensors"))
        checkpoint.write_json(root / "versions.json", {"versions": versions})

    def load_versions(self, directory: str, current: int) -> dict[str, Any]:
        """Restore the kept versions of a checkpoint (none in one without ``rollout/``), mark the loaded weights
        as ``current``; rank 0 returns the oldest kept version for the rollout workers, as :meth:`export_weights`."""
        import time

        from omni_rl.rundir.manifest import CheckpointReader

        start = time.perf_counter()
        sync = self._sync_state()
        sync["current"] = current
        reader = CheckpointReader(Path(directory))
        if not reader.has(f"{VERSIONS_DIR}/versions.json"):
            return self._put(None, start)
        versions = [int(v) for v in reader.read_json(f"{VERSIONS_DIR}/versions.json")["versions"]]
        tensors = reader.load_tensors(f"{VERSIONS_DIR}/weights.safetensors")
        for v in versions:
            trainable = {k.split("/", 2)[2]: t for k, t in tensors.items() if k.startswith(f"v{v}/trainable/")}
            adapters = {k.split("/", 2)[2]: t for k, t in tensors.items() if k.startswith(f"v{v}/adapters/")}
            sync["versions"][v] = WeightsState(version=v, trainable=trainable, adapters=adapters)
        return self._put(sync["versions"][min(versions)], start)
