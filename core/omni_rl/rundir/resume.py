"""Continuing a run from the newest checkpoint that verifies; damaged ones are moved aside and reported.

Every file of a checkpoint is read once while resuming, and checked against its manifest as it is read: the
driver reads its own files (``trainer_state.json``, ``driver/``) and the model's files at the top (the LoRA the
user exports), and checks every listed file's size; each policy worker reads its own directory. Under
``resume = "auto"`` a checkpoint that fails is moved into ``checkpoints/damaged/`` (never deleted), the console
and ``metrics.jsonl`` say which file failed and where the run continues from, and the next older one is tried.
A checkpoint named by ``resume = "<path>"`` that fails is refused (CheckpointDamaged, exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
from rich.console import Console
from rich.text import Text

from omni_rl.errors import CheckpointDamaged
from omni_rl.rundir import checkpoint
from omni_rl.rundir.manifest import CheckpointReader
from omni_rl.rundir.start import RunStart, start_fresh, truncate_metrics

#: the ``event`` of the metrics.jsonl row written for each damaged checkpoint a resume skipped
DAMAGED_EVENT = "checkpoint_damaged"


@attrs.frozen
class Resumed:
    """The checkpoint a run continues from (None: a fresh start) and the driver's part of its state."""

    checkpoint: Path | None = None
    #: ``trainer_state.json``: step, prompt sampler, counters
    state: dict[str, Any] = attrs.field(factory=dict)
    #: the driver's RNG states (tensors, JSON), absent in checkpoints of older versions
    driver_rng: tuple[dict[str, Any], dict[str, Any]] | None = None
    #: whether every file read could be checked against a manifest
    verified: bool = True

    @property
    def step(self) -> int:
        return int(self.state.get("step", 0))


def read_driver_files(directory: Path) -> tuple[CheckpointReader, dict[str, Any], tuple[Any, Any] | None]:
    """The driver's share of loading a checkpoint: every listed file's size, the driver's own files and the
    model's top-level files, each verified. Raises CheckpointDamaged naming the first file that fails."""
    reader = checkpoint.verify_model_files(directory)
    state = reader.read_json("trainer_state.json")
    rng = None
    if reader.has(f"{checkpoint.DRIVER_DIR}/rng.json"):
        rng = (
            reader.load_tensors(f"{checkpoint.DRIVER_DIR}/rng.safetensors"),
            reader.read_json(f"{checkpoint.DRIVER_DIR}/rng.json"),
        )
    return reader, state, rng


def resume(group: Any, start: RunStart, console: Console) -> Resumed:
    """Load the first of ``start.candidates`` that verifies into the workers; see the module docstring."""
    skipped: list[dict[str, Any]] = []
    for candidate in start.candidates:
        try:
            reader, state, rng = read_driver_files(candidate)
            workers_verified = group.call("load_state", str(candidate))
        except CheckpointDamaged as exc:
            if not start.fallback:
                raise
            moved = checkpoint.quarantine(candidate)
            skipped.append(
                {
                    "event": DAMAGED_EVENT,
                    "checkpoint": candidate.name,
                    "file": exc.file,
                    "problem": exc.message,
                    "moved_to": str(moved.relative_to(start.run_dir)),
                }
            )
            console.print(Text.assemble(("warning: ", "bold yellow"), f"{exc.message}; moved it to {moved}"))
            continue
        resumed = Resumed(candidate, state, rng, reader.verified and all(v is not False for v in workers_verified))
        truncate_metrics(start.run_dir / "metrics.jsonl", after_step=resumed.step)
        _report(start.run_dir, skipped, resumed, console)
        return resumed
    start_fresh(start.run_dir)
    _report(start.run_dir, skipped, Resumed(), console)
    return Resumed()


def _report(run_dir: Path, skipped: list[dict[str, Any]], resumed: Resumed, console: Console) -> None:
    """Say where the run continues from after skipping damaged checkpoints, on the console and in metrics.jsonl
    (rows with an ``event`` key and the step continued from, so a later resume keeps them)."""
    where = f"step {resumed.step} ({resumed.checkpoint})" if resumed.checkpoint else "the start (no intact checkpoint)"
    if skipped:
        console.print(
            Text.assemble(
                ("warning: ", "bold yellow"), f"skipped {len(skipped)} damaged checkpoint(s); continuing from {where}"
            )
        )
        with (run_dir / "metrics.jsonl").open("a", encoding="utf-8") as handle:
            for event in skipped:
                handle.write(json.dumps({"step": resumed.step, **event, "continues_from": resumed.step}) + "\n")
    if resumed.checkpoint is not None and not resumed.verified:
        console.print(
            Text.assemble(
                ("warning: ", "bold yellow"),
                f"checkpoint {resumed.checkpoint} has no manifest (written by an older omni-rl): its files cannot "
                "be verified",
            )
        )
