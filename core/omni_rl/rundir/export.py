"""``omni-rl export``: a run's checkpoint as files diffusers loads without omni-rl.

Model-agnostic: the run's own ``config.resolved.toml`` says which model plugin and options to build (on CPU),
the checkpoint is loaded with the model's ``load_lora``, and the model's optional
``export_pipeline(directory, *, merged)`` writes the files (see the DiffusionModel protocol). Core only finds the
checkpoint, verifies the files the model loads against the checkpoint's manifest (a damaged one is refused,
naming the file), guards the output directory and publishes it atomically: an export that fails leaves no partial
directory behind, and existing files are never overwritten.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from omni_rl.context import BuildContext
from omni_rl.errors import CheckpointDamaged, ConfigError, RuntimeFailure, describe_exception
from omni_rl.rundir.checkpoint import verify_model_files
from omni_rl.rundir.manifest import CheckpointReader

if TYPE_CHECKING:
    from omni_rl.registry import Registry

#: Written next to the exported files: which run, step and plugins they came from.
EXPORT_INFO = "omni_rl_export.json"
#: ``checkpoints/latest``: a one-line file naming the latest complete checkpoint directory (when present).
LATEST_POINTER = "latest"
_STEP_DIR = re.compile(r"^step_(\d+)$")
_RUN_DIR_HINT = (
    "pass a run directory: the [run] output_dir of a training run, holding config.resolved.toml and checkpoints/"
)


@attrs.frozen(kw_only=True)
class ExportResult:
    """What :func:`export_run` wrote."""

    directory: Path
    step: int
    checkpoint: Path
    merged: bool
    model: str
    #: whether the checkpoint's files were checked against its manifest (False: written by an older version)
    verified: bool = True


def export_run(
    run_dir: str | Path,
    out: str | Path,
    *,
    step: int | None = None,
    merged: bool = False,
    overrides: Iterable[str] = (),
    registry: Registry | None = None,
) -> ExportResult:
    """Export checkpoint ``step`` (default: the latest) of ``run_dir`` into the new or empty directory ``out``.

    ``overrides`` (``--set`` syntax) change the run's config before the model is built, e.g. the base model's
    path when it moved since training. Usage problems (not a run, no such step, ``out`` not empty) raise
    ConfigError; a model without ``export_pipeline`` raises RuntimeFailure.
    """
    from omni_rl.config import RESOLVED_CONFIG, load_config

    run_dir, out = Path(run_dir), Path(out)
    check_run_dir(run_dir)
    step, checkpoint = find_checkpoint(run_dir, step)
    try:  # before building the model: a damaged checkpoint is refused at once
        reader = verify_model_files(checkpoint)
    except CheckpointDamaged as exc:
        exc.hint = f"export another checkpoint with --step N ({_steps_hint(_step_dirs(run_dir / 'checkpoints'))}); "
        exc.hint += f"check them all with: omni-rl verify {run_dir}"
        raise
    check_output_dir(out)
    config = load_config(run_dir / RESOLVED_CONFIG, list(overrides), registry)
    component = config.components["model"]
    ctx = BuildContext(device="cpu", seed=config.run.seed, run_dir=run_dir, registry=registry)
    model = component.build(ctx)
    exporter = getattr(model, "export_pipeline", None)
    if not callable(exporter):
        raise RuntimeFailure(
            f"model {component.name!r} ({type(model).__name__}) cannot export: it has no export_pipeline method",
            hint=f"the checkpoint's own files are in {checkpoint} (written by the model's save_lora); ask the "
            "model plugin's authors to add export_pipeline (see the DiffusionModel protocol)",
        )
    _load_lora(model, reader)
    info = {
        "run_dir": str(run_dir.resolve()),
        "step": step,
        "checkpoint": str(checkpoint.resolve()),
        "merged": merged,
        "model": component.name,
        "plugins": config.plugin_versions,
    }
    _publish(out, lambda staging: _write(exporter, staging, merged, info))
    return ExportResult(
        directory=out, step=step, checkpoint=checkpoint, merged=merged, model=component.name, verified=reader.verified
    )


def _load_lora(model: Any, reader: CheckpointReader) -> None:
    """The model's ``load_lora``; for a checkpoint without manifest, a file that fails to load is reported as
    damage naming the checkpoint's safetensors files (a verified one has already been checked)."""
    checkpoint = reader.directory
    try:
        model.load_lora(checkpoint)
    except Exception as exc:
        if reader.verified:
            raise
        files = ", ".join(sorted(p.name for p in checkpoint.iterdir() if p.is_file() and p.suffix == ".safetensors"))
        raise reader.damaged(files or "(no safetensors file)", f"cannot be loaded ({describe_exception(exc)})") from exc


def check_run_dir(run_dir: Path) -> None:
    """ConfigError unless ``run_dir`` holds a run's resolved config."""
    from omni_rl.config import RESOLVED_CONFIG

    if not run_dir.is_dir():
        raise ConfigError(f"run directory {str(run_dir)!r} does not exist", hint=_RUN_DIR_HINT)
    if not (run_dir / RESOLVED_CONFIG).is_file():
        raise ConfigError(
            f"{str(run_dir)!r} is not an omni-rl run directory (no {RESOLVED_CONFIG})", hint=_RUN_DIR_HINT
        )


def find_checkpoint(run_dir: Path, step: int | None = None) -> tuple[int, Path]:
    """``(step, directory)`` of checkpoint ``step``, or of the latest one.

    The latest is the directory ``checkpoints/latest`` names when that pointer file exists and names a
    checkpoint, else the highest ``checkpoints/step_<N>`` (staging directories are never considered).
    """
    root = run_dir / "checkpoints"
    available = _step_dirs(root)
    if step is not None:
        if step < 0:
            raise ConfigError(f"--step must be >= 0, got {step}", hint=_steps_hint(available))
        if step not in available:
            raise ConfigError(f"{str(run_dir)!r} has no checkpoint of step {step}", hint=_steps_hint(available))
        return step, available[step]
    if not available:
        raise ConfigError(
            f"{str(run_dir)!r} has no checkpoints (no checkpoints/step_<N>/)",
            hint="checkpoints are written every [run] save_every steps and at the last step; export a run that "
            "got that far",
        )
    pointed = _pointed_step(root)
    if pointed is not None and pointed in available:
        return pointed, available[pointed]
    latest = max(available)
    return latest, available[latest]


def check_output_dir(out: Path) -> None:
    """ConfigError unless ``out`` is new or an empty directory: an export never overwrites files."""
    if out.is_dir() and any(out.iterdir()):
        raise ConfigError(
            f"output directory {str(out)!r} is not empty",
            hint="choose a new or empty --out directory (export never overwrites files)",
        )
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file, not a directory", hint="choose a new --out directory")


def _step_dirs(root: Path) -> dict[int, Path]:
    if not root.is_dir():
        return {}
    found = {}
    for path in root.iterdir():
        match = _STEP_DIR.match(path.name)
        if match and path.is_dir():
            found[int(match.group(1))] = path
    return dict(sorted(found.items()))


def _pointed_step(root: Path) -> int | None:
    """The step the ``latest`` pointer names (``step_<N>``, relative or as a path), if it is readable."""
    pointer = root / LATEST_POINTER
    if not pointer.is_file():
        return None
    match = _STEP_DIR.match(Path(pointer.read_text(encoding="utf-8").strip()).name)
    return int(match.group(1)) if match else None


def _steps_hint(available: dict[int, Path]) -> str:
    if not available:
        return "this run has no checkpoints yet (checkpoints/step_<N>/)"
    return f"available steps: {', '.join(map(str, available))}; leave out --step for the latest"


def _write(exporter: Callable[..., None], staging: Path, merged: bool, info: dict[str, Any]) -> None:
    exporter(staging, merged=merged)
    (staging / EXPORT_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


def _publish(out: Path, write: Callable[[Path], None]) -> None:
    """Write into a hidden sibling directory, then rename it to ``out``: a failed export leaves nothing."""
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.export-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        write(staging)
        check_output_dir(out)  # still new or empty: nothing appeared there while we wrote
        if out.exists():
            out.rmdir()
        staging.rename(out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
