"""Deciding what an output directory means for this run: a fresh start, or a continuation (``[run] resume``).

Nothing already written is lost: ``resume = "never"`` refuses a directory that holds a run, and ``"auto"``
continues from the newest checkpoint that verifies (omni_rl.rundir.resume), dropping only metrics rows logged after it
(the steps that will be recomputed), after backing the old file up.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import attrs

from omni_rl.config.schema import ResolvedConfig
from omni_rl.errors import ConfigError
from omni_rl.rundir.checkpoint import checkpoints_dir, latest_checkpoint, list_checkpoints, step_of
from omni_rl.rundir.writable import writable_directory


@attrs.frozen
class RunStart:
    run_dir: Path
    #: checkpoints to continue from, newest first (empty = fresh start): every live one under ``"auto"`` (the
    #: first that verifies is taken, see omni_rl.rundir.resume), the one named under ``resume = "<path>"``
    candidates: tuple[Path, ...] = ()
    #: whether a damaged candidate is moved aside and the next one tried (``"auto"``) or refused (a named path)
    fallback: bool = False


def resolve_run_start(config: ResolvedConfig) -> RunStart:
    # absolute on the driver: every path sent to the workers (checkpoints) derives from it, and a worker on another
    # node would resolve a relative path in its own working directory
    run_dir = Path(config.run.output_dir).expanduser().absolute()
    resume = config.run.resume
    # an empty metrics.jsonl is a run that stopped before logging its first step (a config error a worker found at
    # step 1): nothing to keep, so the corrected command starts afresh instead of being refused
    has_run = holds_metrics(run_dir / "metrics.jsonl") or bool(list_checkpoints(run_dir))
    if resume == "never":
        if has_run:
            raise ConfigError(
                f"output directory {str(run_dir)!r} already holds a run (metrics or checkpoints) @ $.run.output_dir",
                hint="continue it with --set run.resume=auto, or choose a new [run] output_dir; nothing was changed",
            )
        return RunStart(run_dir)
    if resume == "auto":
        newest = latest_checkpoint(run_dir)
        # the one ``latest`` names first, then the older complete ones, newest first (one newer than the pointer
        # is a checkpoint whose save did not finish, e.g. the pointer update failed: it is never preferred)
        rest = [
            p
            for p in reversed(list_checkpoints(run_dir))
            if (p / "trainer_state.json").is_file() and (newest is None or step_of(p) < step_of(newest))
        ]
        return RunStart(run_dir, tuple([newest] if newest is not None else []) + tuple(rest), fallback=True)
    checkpoint = Path(resume).expanduser().absolute()
    if not (checkpoint / "trainer_state.json").is_file():
        raise ConfigError(
            f"resume path {resume!r} is not a complete omni-rl checkpoint (no trainer_state.json) @ $.run.resume",
            hint=f"use 'auto' or a directory like {run_dir}/checkpoints/step_<N>",
        )
    return RunStart(run_dir, (checkpoint,))


def holds_metrics(path: Path) -> bool:
    """Whether ``path`` (a ``metrics.jsonl``) holds anything but whitespace: a logged step."""
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 16):
                if chunk.strip():
                    return True
    except FileNotFoundError:
        return False
    return False


def start_fresh(run_dir: Path) -> None:
    """No checkpoint to continue from: an old ``metrics.jsonl`` is kept as a backup, not appended to (an empty one,
    of a run that logged nothing, is removed)."""
    path = run_dir / "metrics.jsonl"
    if holds_metrics(path):
        shutil.move(path, run_dir / f"metrics.{int(time.time())}.jsonl")
    elif path.is_file():
        path.unlink()


def truncate_metrics(path: Path, after_step: int) -> None:
    """Keep rows up to ``after_step``; the dropped rows are kept in a backup file next to it."""
    if not path.exists():
        return
    lines = path.read_text(encoding="utf-8").splitlines()
    keep = [line for line in lines if line.strip() and _step(line) <= after_step]
    if len(keep) == len(lines):
        return
    shutil.copy2(path, path.with_name(f"metrics.{int(time.time())}.jsonl"))
    tmp = path.with_name(".metrics.jsonl.tmp")
    tmp.write_text("".join(line + "\n" for line in keep), encoding="utf-8")
    tmp.replace(path)


def _step(line: str) -> int:
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return 1 << 62


def prepare(run_dir: Path) -> None:
    writable_directory(run_dir, "$.run.output_dir")  # a file or a read-only place: exit 2, nothing started
    checkpoints_dir(run_dir).mkdir(parents=True, exist_ok=True)
