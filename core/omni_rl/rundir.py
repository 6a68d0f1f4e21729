"""Deciding what an output directory means for this run: a fresh start, or a continuation (``[run] resume``).

Nothing already written is lost: ``resume = "never"`` refuses a directory that holds a run, and ``"auto"``
continues from the latest complete checkpoint, dropping only metrics rows logged after it (the steps that
will be recomputed), after backing the old file up.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import attrs

from omni_rl.checkpoint import checkpoints_dir, latest_checkpoint, list_checkpoints, read_json
from omni_rl.errors import ConfigError
from omni_rl.schema import ResolvedConfig


@attrs.frozen
class RunStart:
    run_dir: Path
    #: checkpoint to continue from (None = fresh start)
    checkpoint: Path | None
    #: the driver state saved with it (step, prompt sampler, counters)
    state: dict


def resolve_run_start(config: ResolvedConfig) -> RunStart:
    # absolute on the driver: every path sent to the workers (checkpoints) derives from it, and a worker on another
    # node would resolve a relative path in its own working directory
    run_dir = Path(config.run.output_dir).expanduser().absolute()
    resume = config.run.resume
    has_run = (run_dir / "metrics.jsonl").exists() or bool(list_checkpoints(run_dir))
    if resume == "never":
        if has_run:
            raise ConfigError(
                f"output directory {str(run_dir)!r} already holds a run (metrics or checkpoints) @ $.run.output_dir",
                hint="continue it with --set run.resume=auto, or choose a new [run] output_dir; nothing was changed",
            )
        return RunStart(run_dir, None, {})
    if resume == "auto":
        checkpoint = latest_checkpoint(run_dir)
    else:
        checkpoint = Path(resume).expanduser().absolute()
        if not (checkpoint / "trainer_state.json").is_file():
            raise ConfigError(
                f"resume path {resume!r} is not a complete omni-rl checkpoint (no trainer_state.json) @ $.run.resume",
                hint=f"use 'auto' or a directory like {run_dir}/checkpoints/step_<N>",
            )
    if checkpoint is None:
        if (run_dir / "metrics.jsonl").exists():
            backup = run_dir / f"metrics.{int(time.time())}.jsonl"
            shutil.move(run_dir / "metrics.jsonl", backup)
        return RunStart(run_dir, None, {})
    state = read_json(checkpoint / "trainer_state.json")
    truncate_metrics(run_dir / "metrics.jsonl", after_step=int(state["step"]))
    return RunStart(run_dir, checkpoint, state)


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
    checkpoints_dir(run_dir).mkdir(parents=True, exist_ok=True)
