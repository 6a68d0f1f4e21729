"""Module paths of omni-rl 0.1.0 that moved when the core was grouped by role, kept importable for one release.

``import omni_rl.schema`` (or ``from omni_rl import checkpoint``) still works: a meta-path finder hands back the
module at its new path (the same module object, so patches and ``isinstance`` checks agree) and warns once with a
``DeprecationWarning`` naming the new path. Three old modules became packages of the same name
(``omni_rl.rewards``, ``omni_rl.evaluation``, ``omni_rl.rundir``); their package faces forward the old module's
names through :func:`moved_attribute`. Both go in omni-rl 0.2.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

#: old module path -> its home since the core was grouped by role
MOVED_MODULES: dict[str, str] = {
    "omni_rl.schema": "omni_rl.config.schema",
    "omni_rl.runtime.update": "omni_rl.engine.trajectory_update",
    "omni_rl.runtime.forward_update": "omni_rl.engine.forward_update",
    "omni_rl.runtime.stepping": "omni_rl.engine.stepping",
    "omni_rl.runtime.micro_batch": "omni_rl.engine.micro_batch",
    "omni_rl.runtime.auto_micro_batch": "omni_rl.engine.auto_micro_batch",
    "omni_rl.runtime.batch_parts": "omni_rl.engine.batch_parts",
    "omni_rl.runtime.trajectory": "omni_rl.engine.trajectory",
    "omni_rl.runtime.sharding": "omni_rl.engine.sharding",
    "omni_rl.runtime.optim": "omni_rl.engine.optim",
    "omni_rl.runtime.fsdp": "omni_rl.engine.fsdp",
    "omni_rl.runtime.profiling": "omni_rl.engine.profiling",
    "omni_rl.placement": "omni_rl.engine.placement",
    "omni_rl.placement_guard": "omni_rl.engine.placement_guard",
    "omni_rl.rollout_correction": "omni_rl.engine.rollout_correction",
    "omni_rl.run_lock": "omni_rl.rundir.lock",
    "omni_rl.checkpoint": "omni_rl.rundir.checkpoint",
    "omni_rl.manifest": "omni_rl.rundir.manifest",
    "omni_rl.safetensors_view": "omni_rl.rundir.safetensors_view",
    "omni_rl.resume": "omni_rl.rundir.resume",
    "omni_rl.resume_guard": "omni_rl.rundir.resume_guard",
    "omni_rl.verify": "omni_rl.rundir.verify",
    "omni_rl.export": "omni_rl.rundir.export",
    "omni_rl.writable": "omni_rl.rundir.writable",
    "omni_rl.faults": "omni_rl.runtime.faults",
    "omni_rl.reward_health": "omni_rl.rewards.health",
    "omni_rl.frame_rewards": "omni_rl.rewards.frames",
    "omni_rl.reward_protocol": "omni_rl.rewards.protocol",
    "omni_rl.metrics": "omni_rl.reporting.metrics_logger",
    "omni_rl.loggers": "omni_rl.reporting.backends",
    "omni_rl.metrics_file": "omni_rl.reporting.metrics_reader",
    "omni_rl.plots": "omni_rl.reporting.reward_curve",
    "omni_rl.images": "omni_rl.reporting.image_grids",
    "omni_rl.videos": "omni_rl.reporting.video_grids",
    "omni_rl.run_summary": "omni_rl.reporting.run_summary",
    "omni_rl.compare": "omni_rl.reporting.compare",
    "omni_rl.smoothing": "omni_rl.reporting.smoothing",
    "omni_rl.console_width": "omni_rl.reporting.console_width",
    "omni_rl.video_formats": "omni_rl.reporting.video_formats",
    "omni_rl.eval_model": "omni_rl.evaluation.generator",
    "omni_rl.eval_compare": "omni_rl.evaluation.compare",
    "omni_rl.trainer": "omni_rl.train.trainer",
    "omni_rl.asynchrony": "omni_rl.train.staleness",
    "omni_rl.advantages": "omni_rl.train.advantages",
    "omni_rl.advantage_checks": "omni_rl.train.advantage_checks",
    "omni_rl.interrupts": "omni_rl.train.interrupts",
    "omni_rl.preflight": "omni_rl.train.preflight",
    "omni_rl.stop_signal": "omni_rl.serving.stop_signal",
    "omni_rl.quiet": "omni_rl.cli.quiet",
}

#: old modules whose name is now a package: the package forwards the old module's names
MOVED_INTO_PACKAGE: dict[str, str] = {
    "omni_rl.rundir": "omni_rl.rundir.start",
    "omni_rl.rewards": "omni_rl.rewards.combined",
    "omni_rl.evaluation": "omni_rl.evaluation.loop",
}


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} moved to {new}: import it from there (the old path is removed in omni-rl 0.2)",
        DeprecationWarning,
        stacklevel=3,
    )


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolve an old module path to the module at its new path (one module object under both names)."""

    def find_spec(self, fullname: str, path: Any = None, target: ModuleType | None = None) -> Any:
        if fullname not in MOVED_MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED_MODULES[spec.name]
        _warn(spec.name, new)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module at the new path is already imported."""


def moved_attribute(package: str, name: str) -> Any:
    """A name of the old module ``package`` (now a package) read from the module it moved to, with a warning;
    AttributeError when that module has no such name (so submodule imports of the package proceed as usual)."""
    new = MOVED_INTO_PACKAGE[package]
    module = importlib.import_module(new)
    if name.startswith("__") or not hasattr(module, name):
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    _warn(f"{package}.{name}", f"{new}.{name}")
    return getattr(module, name)


def install() -> None:
    """Put the finder on ``sys.meta_path`` once (importing ``omni_rl`` calls this)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
