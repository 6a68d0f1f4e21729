"""Refuse a resume whose config changes what the checkpoint fixes, before anything is started or written.

A checkpoint holds the adapter's weights and the optimizer state in the shapes the run had (``lora_rank``, the
modules that got LoRA) and the policy its ``lora_alpha`` scaled: resuming a rank-8 run with
``--set model.options.lora_rank=16`` cannot load, and used to fail only inside the workers, after the run had
rewritten ``config.resolved.toml`` with the new rank (so the printed resume command and ``omni-rl export`` failed
from then on). The checkpoint's own run directory keeps the config it was written with; comparing the options
below against it names the change and both values (exit 2). Every other option (lr, steps, rewards, logging) may
change on resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli

from omni_rl.config.resolved import RESOLVED_CONFIG
from omni_rl.errors import ConfigError

#: dotted paths of the resolved config that a checkpoint fixes
FIXED_ON_RESUME: tuple[str, ...] = (
    "model.name",
    "model.options.lora_rank",
    "model.options.lora_alpha",
    "model.options.lora_target_modules",
)

_MISSING = object()


def _get(raw: Mapping[str, Any], dotted: str) -> Any:
    value: Any = raw
    for key in dotted.split("."):
        if not isinstance(value, Mapping) or key not in value:
            return _MISSING
        value = value[key]
    return value


def saved_config_of(checkpoint: Path) -> Path:
    """The resolved config of the run that wrote ``checkpoint`` (``<run dir>/checkpoints/step_<N>``)."""
    return checkpoint.parents[1] / RESOLVED_CONFIG


def changed_fixed_options(saved: Mapping[str, Any], raw: Mapping[str, Any]) -> list[tuple[str, Any, Any]]:
    """(path, the checkpoint run's value, this config's value) for each fixed option that differs; an option
    absent from either side (another model plugin, an older omni-rl) is not compared, except the model's name."""
    changes = []
    for path in FIXED_ON_RESUME:
        old, new = _get(saved, path), _get(raw, path)
        if old is not _MISSING and new is not _MISSING and _normalise(old) != _normalise(new):
            changes.append((path, old, new))
    if changes and changes[0][0] == "model.name":
        return changes[:1]  # another model plugin: its options are not comparable
    return changes


def _normalise(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_normalise(v) for v in value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return value


def fixed_option_problems(raw: Mapping[str, Any], checkpoint: Path) -> list[str]:
    """One line per fixed option this config (``raw``: the resolved config) changes against the run that wrote
    ``checkpoint``; none when that run's config cannot be read (a checkpoint copied without its run)."""
    saved_path = saved_config_of(checkpoint)
    try:
        saved = tomli.loads(saved_path.read_text(encoding="utf-8"))
    except (OSError, tomli.TOMLDecodeError):
        return []
    return [
        f"cannot resume from {checkpoint}: {path} is {_show(new)} here but {_show(old)} in the run that wrote the "
        f"checkpoint ({saved_path}) @ $.{path}"
        for path, old, new in changed_fixed_options(saved, raw)
    ]


def check_fixed_options(raw: Mapping[str, Any], checkpoint: Path) -> None:
    """Raise a ConfigError naming every fixed option this config changes (see :func:`fixed_option_problems`)."""
    problems = fixed_option_problems(raw, checkpoint)
    if problems:
        raise ConfigError(
            "; ".join(problems),
            hint="a checkpoint keeps the shapes and options its run trained with: resume with the run's values "
            "(drop the --set), or start a new run with another [run] output_dir; nothing was changed",
        )


def _show(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)
