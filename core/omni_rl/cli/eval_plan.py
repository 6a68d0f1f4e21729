"""What ``omni-rl eval`` settles before it writes or loads anything: its numbers, the device, which checkpoints
(verified) go to which output folders, and the command that resumes it.

Each check used to come after work had started: an invalid ``--limit`` was refused after ``eval_info.json`` had
been written (so the corrected command was refused as a settings change), ``--compare A B`` evaluated A fully
before finding that B did not exist, and ``--device`` typos or an unwritable ``--out`` surfaced as raw exceptions
(exit 1). Now every one is a usage error (exit 2, one line naming the option) before the first model loads.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import attrs

from omni_rl.errors import ConfigError

#: the largest ``--seed``, as ``[run] seed``'s
MAX_SEED = 2**32 - 1
_DEVICE_HINT = "use auto (a GPU when one is visible), cpu, cuda or cuda:N"


@attrs.frozen
class EvalJob:
    """One model to evaluate: a run's checkpoint ``step`` (None for a pipeline) and where its results go."""

    step: int | None
    out: Path


def check_numbers(args: argparse.Namespace) -> None:
    """``--images-per-prompt``, ``--limit`` and ``--seed`` in range."""
    if args.images_per_prompt is not None and args.images_per_prompt < 1:
        raise ConfigError(f"--images-per-prompt must be >= 1, got {args.images_per_prompt}")
    if args.limit is not None and args.limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {args.limit}", hint="leave --limit out to evaluate every prompt")
    if not 0 <= args.seed <= MAX_SEED:
        raise ConfigError(f"--seed must be an integer between 0 and {MAX_SEED:,}, got {args.seed}")


def parse_device(option: str) -> str:
    """``--device``: ``auto`` resolved, anything else checked to name a device this torch can use."""
    import torch

    if option == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(option)
    except (RuntimeError, ValueError):
        raise ConfigError(f"--device {option!r} is not a device name", hint=_DEVICE_HINT) from None
    if device.type == "cpu":
        return str(device)
    if device.type != "cuda":
        raise ConfigError(f"--device {option!r}: omni-rl eval samples on the CPU or a CUDA GPU", hint=_DEVICE_HINT)
    if not torch.cuda.is_available():
        built = "" if torch.version.cuda else f" (this torch, {torch.__version__}, is built without CUDA)"
        raise ConfigError(f"--device {option!r}: no CUDA GPU is visible{built}", hint="use --device cpu (or auto)")
    count = torch.cuda.device_count()
    if device.index is not None and device.index >= count:
        raise ConfigError(
            f"--device {option!r}: there is no GPU {device.index}; {count} visible (cuda:0 to cuda:{count - 1})",
            hint=_DEVICE_HINT,
        )
    return str(device)


def plan_jobs(args: argparse.Namespace, benchmark: str, target: Path, kind: str) -> list[EvalJob]:
    """The models to evaluate, in order, each with its output folder. A run's checkpoints are found and their
    model files verified here, all of them before the first is evaluated."""
    if kind != "run":
        return [EvalJob(None, Path(args.out) if args.out else _pipeline_out(args, benchmark, target))]
    from omni_rl.rundir.checkpoint import list_checkpoints, step_of, verify_model_files
    from omni_rl.rundir.export import find_checkpoint

    jobs = []
    for wanted in args.compare if args.compare is not None else [args.step]:
        try:
            step, checkpoint = find_checkpoint(target, wanted)
        except ConfigError as exc:
            if args.compare is None:
                raise
            steps = ", ".join(str(step_of(p)) for p in list_checkpoints(target)) or "none"
            raise ConfigError(
                f"--compare: {exc.message}", hint=f"available steps: {steps}; --compare takes two of them"
            ) from None
        verify_model_files(checkpoint)  # a damaged checkpoint is refused before either model is built
        if args.compare is not None:
            out = Path(args.out) / f"step_{step}" if args.out else target / "eval" / f"{benchmark}_step_{step}"
        else:
            out = Path(args.out) if args.out else target / "eval" / f"{benchmark}_step_{step}"
        jobs.append(EvalJob(step, out))
    return jobs


def comparison_out(args: argparse.Namespace, benchmark: str, target: Path) -> Path:
    """Where ``--compare A B`` writes its table: ``--out``, or ``RUN_DIR/eval/<benchmark>_step_<A>_vs_<B>``."""
    first, second = args.compare
    return Path(args.out) if args.out else target / "eval" / f"{benchmark}_step_{first}_vs_{second}"


def _pipeline_out(args: argparse.Namespace, benchmark: str, target: Path) -> Path:
    """Beside a pipeline, ``<name>-eval/<benchmark>`` (in the working directory for a ``package:`` pipeline: never
    inside an installed package)."""
    from omni_rl.package_paths import is_package_path

    parent = Path.cwd() if is_package_path(args.target) else target.parent
    return parent / f"{target.name}-eval" / benchmark


def resume_command(args: argparse.Namespace, jobs: list[EvalJob]) -> str:
    """The command that continues this evaluation, quoted for a POSIX shell; a run's latest checkpoint is pinned
    (``--step N``), so that one saved meanwhile does not start another evaluation."""
    words = ["omni-rl", "eval", args.target, "--benchmark", args.benchmark]
    if args.compare is not None:
        words += ["--compare", *(str(step) for step in args.compare)]
    elif jobs and jobs[0].step is not None:
        words += ["--step", str(jobs[0].step)]
    if args.images_per_prompt is not None:
        words += ["--images-per-prompt", str(args.images_per_prompt)]
    if args.out:
        words += ["--out", args.out]
    if args.limit is not None:
        words += ["--limit", str(args.limit)]
    if args.seed:
        words += ["--seed", str(args.seed)]
    if args.device != "auto":
        words += ["--device", args.device]
    for text in args.set or ():
        words += ["--set", text]
    return shlex.join(words)
