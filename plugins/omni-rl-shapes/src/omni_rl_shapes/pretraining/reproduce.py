"""Re-make a shipped shapes pipeline from its record, every stage, with one command.

``python -m omni_rl_shapes.pretraining.reproduce --arch qwen_image --work DIR`` reads the shipped pipeline's record
(``omni_rl_shapes_pretrain.json``: each stage's exact command, nested under ``init_from`` back to the stage that
built it from random weights) and runs those stages in order with :mod:`omni_rl_shapes.pretraining.pretrain`, each
in its own process, each continuing the one before. Only the paths change (``--out``, ``--samples-dir`` and
``--init-from`` point into ``DIR``), and a stage that the recorded run cut with ``--max-minutes`` is replayed for
exactly the steps it trained (``--steps``), so wall-clock limits on another machine do not change what it learns.
Every stage is deterministic for its seed and thread count, so the last one reproduces the shipped weights'
evaluations. Records written before the module moved into ``omni_rl_shapes.pretraining`` (every shipped one) name
``omni_rl_shapes.pretrain``; their stages run the same (:data:`RECORDED_MODULES`).

A stage whose output is already in ``DIR`` is kept, so a stopped reproduction goes on where it stopped.
``--dry-run`` prints the commands instead.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from omni_rl_shapes import PRETRAINED_DIRS, pretrained_path
from omni_rl_shapes.evaluate import RECORD_FILE, read_record
from omni_rl_shapes.pretraining.pretrain import choose_checkpoint

#: the module every stage runs (``python -m``), and what a stage command recorded today starts with
PRETRAIN_MODULE = "omni_rl_shapes.pretraining.pretrain"
COMMAND_PREFIX = f"python -m {PRETRAIN_MODULE}"
#: the modules a recorded stage command may name: today's, and the one before it moved into
#: ``omni_rl_shapes.pretraining`` (the records of every shipped pipeline say that one; they are replayed the same)
RECORDED_MODULES = (PRETRAIN_MODULE, "omni_rl_shapes.pretrain")
#: options that name the recorded run's own paths; the replay sets its own
_PATH_OPTIONS = ("--out", "--samples-dir", "--init-from")
#: generous wall-clock cap of a replayed stage (its length is fixed by --steps or by the stop rule instead)
_REPLAY_MINUTES_FACTOR = 10.0


@attrs.frozen
class Stage:
    """One recorded pretraining stage, replayable: its arguments without paths, and why it stopped."""

    index: int
    args: tuple[str, ...]
    stopped_by_time: bool
    steps_trained: int
    wall_time_s: float

    def argv(self, work: Path) -> list[str]:
        """The stage's pretrain arguments with its output (and its input, the previous stage) inside ``work``."""
        argv = [*self.args, "--out", str(stage_dir(work, self.index))]
        argv += ["--samples-dir", str(work / f"samples{self.index}")]
        if self.index > 1:
            argv += ["--init-from", str(stage_dir(work, self.index - 1))]
        return argv


def stage_dir(work: Path, index: int) -> Path:
    return work / f"stage{index}"


def stages_of(record: dict[str, Any]) -> list[Stage]:
    """The stages of a record, the from-scratch one first."""
    chain: list[dict[str, Any]] = []
    node: dict[str, Any] | None = record
    while node:
        chain.append(node)
        node = node.get("init_from")
    return [_stage(i, rec) for i, rec in enumerate(reversed(chain), start=1)]


def _stage(index: int, record: dict[str, Any]) -> Stage:
    command = record.get("command", "")
    args = _without_options(recorded_args(command, index), _PATH_OPTIONS)
    evals = record.get("evals") or []
    last = int(evals[-1]["step"]) if evals else int(record["transformer"]["steps"])
    low, high = record.get("target_band", (0.35, 0.55))
    ended_early = last < int(record["transformer"].get("max_steps", last))
    by_time = ended_early and choose_checkpoint([e["score"] for e in evals], low, high) is None
    wall = float(record.get("wall_time_s", 0.0))
    if by_time:  # the wall-clock cap ended it: replay exactly the steps it trained, with room on the clock
        if "--cosine-decay" in args:
            raise ValueError(
                f"stage {index} was cut by --max-minutes with --cosine-decay: its schedule spans the planned "
                "--steps, so a replay of the steps it trained would not follow the same learning rates"
            )
        args = (*_without_options(args, ("--steps",)), "--steps", str(last))
    minutes = max(wall / 60 * _REPLAY_MINUTES_FACTOR, 60.0)
    args = (*_without_options(args, ("--max-minutes",)), "--max-minutes", f"{minutes:.0f}")
    return Stage(index, tuple(args), by_time, last, wall)


def recorded_args(command: str, index: int = 1) -> list[str]:
    """The pretrain arguments of a recorded stage command (``python -m <one of RECORDED_MODULES> ARGS``)."""
    words = shlex.split(command) if isinstance(command, str) else []
    if words[:2] != ["python", "-m"] or len(words) < 3 or words[2] not in RECORDED_MODULES:
        raise ValueError(f"stage {index} of the record has no pretrain command (got {str(command)[:60]!r})")
    return words[3:]


def _without_options(args: Sequence[str], options: Sequence[str]) -> tuple[str, ...]:
    """``args`` without the given options and their values (``--opt value`` or ``--opt=value``)."""
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in options:
            skip = "=" not in arg
            continue
        kept.append(arg)
    return tuple(kept)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m omni_rl_shapes.pretraining.reproduce", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--arch", choices=sorted(PRETRAINED_DIRS), default="sd3", help="which shipped pipeline")
    parser.add_argument(
        "--record",
        type=Path,
        default=None,
        help="a pipeline directory or record file to replay instead of the shipped one",
    )
    parser.add_argument("--work", type=Path, required=True, help="stage outputs go here (stage1, stage2, ...)")
    parser.add_argument("--dry-run", action="store_true", help="print the stage commands, run nothing")
    return parser.parse_args(argv)


def _read_stages(args: argparse.Namespace) -> tuple[dict[str, Any], list[Stage]]:
    """The record to replay and its stages; a missing, unreadable or malformed record exits with what is wrong."""
    try:
        source = args.record if args.record is not None else pretrained_path(args.arch)
    except FileNotFoundError as error:  # a package built without that model (the motion model, for now)
        raise SystemExit(f"reproduce: {error}") from error
    path = source / RECORD_FILE if source.is_dir() else source
    if not path.is_file():
        raise SystemExit(f"reproduce: no pretraining record at {path}")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        return record, stages_of(record)
    except (ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
        raise SystemExit(
            f"reproduce: {path} is not a pretraining record {PRETRAIN_MODULE} wrote ({error!r}); pass the pipeline "
            "directory or its omni_rl_shapes_pretrain.json"
        ) from error


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    record, stages = _read_stages(args)
    total = sum(s.wall_time_s for s in stages) / 60
    print(f"{len(stages)} stages, recorded wall time {total:.0f} minutes; outputs under {args.work}", flush=True)
    for stage in stages:
        command = [sys.executable, "-m", PRETRAIN_MODULE, *stage.argv(args.work)]
        note = f" (recorded: cut by --max-minutes at step {stage.steps_trained})" if stage.stopped_by_time else ""
        print(f"stage {stage.index}{note}: {shlex.join(command)}", flush=True)
        if args.dry_run:
            continue
        if (stage_dir(args.work, stage.index) / RECORD_FILE).is_file():
            print(f"stage {stage.index}: already in {stage_dir(args.work, stage.index)}, kept", flush=True)
            continue
        args.work.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(command, check=False)
        if done.returncode != 0:
            print(
                f"reproduce: stage {stage.index} failed (exit {done.returncode}); rerun to go on from it",
                file=sys.stderr,
            )
            return done.returncode
    if not args.dry_run:
        made = read_record(stage_dir(args.work, len(stages)))
        shipped = record.get("val", {}).get("score")
        versus = f", the record's {shipped:.4f}" if shipped is not None else ""
        print(f"val: reproduced {made['val']['score']:.4f}{versus}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
