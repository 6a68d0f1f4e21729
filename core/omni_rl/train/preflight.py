"""What ``omni-rl check`` verifies beyond the config itself, without loading a weight or starting Ray.

The config can be valid and the run still fail in its first minute, inside a worker: the model path is wrong or
is not a pipeline, a reward's API-key variable is unset, ``output_dir`` cannot be written, the checkpoint to
resume from is missing or does not fit the config. Each is cheap to check on this machine, so ``check`` lists
them all at once (exit 2). Conventions the core relies on, so that third-party components get the same checks:

- a model's ``options.path`` is a diffusers pipeline directory (holding ``model_index.json``), a
  ``package:<module>:<path>``, or a hub id (not checked here: resolved when the workers load it); with
  ``options.build_tiny_if_missing = true`` a missing path is fine;
- any component option whose name ends in ``_env`` names an environment variable the component reads (an API
  key), which must be set when it is non-empty, to one printable token (:mod:`omni_rl.config.secret_env`).
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from omni_rl.config.component_preflight import component_preflight_problems
from omni_rl.config.schema import ResolvedComponent, ResolvedConfig
from omni_rl.config.secret_env import read_secret, secret_problem
from omni_rl.errors import ConfigError
from omni_rl.package_paths import is_package_path, package_path
from omni_rl.rundir.resume_guard import fixed_option_problems
from omni_rl.train.frame_counts import frame_count_problems

#: a Hugging Face hub id (``org/name``); a path that does not exist and looks like one is left to the loader
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def preflight_problems(config: ResolvedConfig) -> list[str]:
    """Every problem found, one line each ending in its ``@ $.path``."""
    problems = model_path_problems(config.components["model"])
    problems += frame_count_problems(config)  # a video model's num_frames against its pipeline's VAE
    for component in (*config.components.values(), *config.rewards, *config.eval_rewards):
        problems += env_var_problems(component)
    problems += component_preflight_problems(config)  # each component's own spec.preflight (weights, metadata)
    problems += run_dir_problems(config)
    return problems


def preflight(config: ResolvedConfig, source: str) -> None:
    """Raise one ConfigError listing every problem of :func:`preflight_problems`."""
    problems = preflight_problems(config)
    if problems:
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise ConfigError(
            f"{source} is valid, but the run would fail ({count}):\n{lines}",
            hint="fix each line; `omni-rl check` checked this without loading the model or starting Ray",
        )


def model_path_problems(model: ResolvedComponent) -> list[str]:
    """The model's ``options.path`` names a pipeline directory (see the module docstring)."""
    path = getattr(model.options, "path", None)
    where = f"{model.path or '$.model'}.options.path"
    if not isinstance(path, str) or not path:
        return []
    if is_package_path(path):
        try:
            directory = package_path(path, "model")
        except ConfigError as exc:
            return [exc.message if " @ " in exc.message else f"{exc.message} @ {where}"]
    else:
        directory = Path(path).expanduser()
        if not directory.exists():
            if getattr(model.options, "build_tiny_if_missing", False) or _HUB_ID.match(path):
                return []
            shown = "" if directory.is_absolute() else f" (from {Path.cwd()})"
            return [f"model path {path!r} does not exist{shown} @ {where}"]
    if not directory.is_dir():
        return [f"model path {path!r} is a file, not a pipeline directory @ {where}"]
    if not (directory / "model_index.json").is_file():
        return [f"model path {path!r} is not a diffusers pipeline directory (no model_index.json in it) @ {where}"]
    return []


def env_var_problems(component: ResolvedComponent) -> list[str]:
    """Every non-empty ``*_env`` option of ``component`` names a variable set in this environment. The value is
    never printed: only the variable's name."""
    options = component.options
    if not attrs.has(type(options)):
        return []
    problems = []
    for field in attrs.fields(type(options)):
        name = getattr(options, field.name)
        if not (field.name.endswith("_env") and isinstance(name, str) and name):
            continue
        where = f"{component.path or '$.' + component.kind}.options.{field.name}"
        value = read_secret(name)  # as the component reads it: surrounding whitespace (a final newline) dropped
        if not value:
            problems.append(
                f"{component.kind} {component.name!r} reads the environment variable {name}, which is not set @ {where}"
            )
        elif (problem := secret_problem(value)) is not None:
            problems.append(f"{component.kind} {component.name!r}: the environment variable {name} {problem} @ {where}")
    return problems


def run_dir_problems(config: ResolvedConfig) -> list[str]:
    """``output_dir`` can be written, and what ``[run] resume`` asks for is there and fits this config."""
    from omni_rl.rundir.start import resolve_run_start
    from omni_rl.rundir.writable import writable_directory

    problems = []
    try:
        writable_directory(config.run.output_dir, "$.run.output_dir")
    except ConfigError as exc:
        problems.append(exc.message)
    if config.run.resume != "never":  # ("never" into a used directory: `run` says so, before anything starts)
        try:
            start = resolve_run_start(config)
        except ConfigError as exc:  # a named checkpoint that is not there
            problems.append(exc.message)
        else:
            if start.candidates:
                problems += fixed_option_problems(config.raw, start.candidates[0])
    return problems
