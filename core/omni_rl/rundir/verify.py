"""``omni-rl verify``: read every checkpoint of a run and check each file against its manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import attrs

from omni_rl.errors import CheckpointDamaged, ConfigError
from omni_rl.rundir.checkpoint import ABANDONED, DAMAGED, STEP_DIR, checkpoints_dir, list_checkpoints, step_dirs
from omni_rl.rundir.manifest import CheckpointReader

Status = Literal["verified", "damaged", "unverifiable"]


@attrs.frozen(kw_only=True)
class CheckpointStatus:
    """One checkpoint's verdict: ``unverifiable`` = written before manifests existed (its files were read, not
    checked); ``problem`` names the damaged file."""

    step: int
    path: Path
    files: int
    size: int
    status: Status
    problem: str = ""
    #: ``""`` for the live branch, ``"abandoned"`` for a branch left by resuming from an older step
    branch: str = ""


def verify_checkpoint(directory: Path, branch: str = "") -> CheckpointStatus:
    """Read and check every file of one checkpoint (a full read: this is the command that looks at all of it)."""
    match = STEP_DIR.match(directory.name)
    step = int(match.group(1)) if match else -1
    on_disk = [p for p in directory.rglob("*") if p.is_file()]
    files, size = len(on_disk), sum(p.stat().st_size for p in on_disk)
    try:
        reader = CheckpointReader(directory)
        reader.check_all()
        if not reader.verified:
            for path in on_disk:  # still read: an unreadable file is damage even without manifest
                path.read_bytes()
    except CheckpointDamaged as exc:
        problem = exc.message.split(" is damaged: ", 1)[-1]  # "<file> <what is wrong with it>"
        return CheckpointStatus(step=step, path=directory, files=files, size=size, status="damaged", problem=problem)
    except OSError as exc:
        return CheckpointStatus(step=step, path=directory, files=files, size=size, status="damaged", problem=str(exc))
    status: Status = "verified" if reader.verified else "unverifiable"
    return CheckpointStatus(step=step, path=directory, files=files, size=size, status=status, branch=branch)


def verify_run(run_dir: Path) -> tuple[list[CheckpointStatus], int]:
    """Every live and abandoned checkpoint of ``run_dir``, checked; and how many an earlier resume already moved
    into ``checkpoints/damaged/`` (reported, not checked again)."""
    root = checkpoints_dir(run_dir)
    if not root.is_dir():
        raise ConfigError(
            f"{str(run_dir)!r} has no checkpoints/ directory",
            hint="pass a run directory: the [run] output_dir of a training run that wrote checkpoints",
        )
    results = [verify_checkpoint(path) for path in list_checkpoints(run_dir)]
    results += [verify_checkpoint(path, ABANDONED) for path in step_dirs(root / ABANDONED)]
    damaged = root / DAMAGED
    moved = sum(1 for p in damaged.iterdir() if p.is_dir()) if damaged.is_dir() else 0
    return results, moved
