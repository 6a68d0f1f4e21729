"""The plugin manager: owns the entry-point loop, so one broken plugin never hides the others.

pluggy's own ``load_setuptools_entrypoints`` stops at the first plugin that fails to import. We load each
entry point of the ``omni_rl`` group in its own ``try`` and record the outcome in a :class:`PluginInfo`
(``active`` / ``disabled`` / ``error``), which is what ``omni-rl plugins`` lists and what an "unknown
component" message points at when the component's plugin is the one that failed.

Two environment variables select plugins, matched against the entry-point name or the distribution name:

- ``OMNI_RL_DISABLE_PLUGINS=a,b``: never import these (a plugin that breaks at import time can be switched
  off without uninstalling it);
- ``OMNI_RL_LOAD_PLUGINS=a,b``: import only these (tests and bug reports get a reproducible plugin set).
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
import re
import traceback
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import pluggy

from omni_rl import hookspecs
from omni_rl.errors import PluginError, describe_exception

ENTRY_POINT_GROUP = hookspecs.PROJECT_NAME
DISABLE_ENV = "OMNI_RL_DISABLE_PLUGINS"
LOAD_ENV = "OMNI_RL_LOAD_PLUGINS"

Status = Literal["active", "disabled", "error"]

#: Every hook name the core defines (the hook specs), for validating plugins and suggesting spellings.
HOOK_NAMES: tuple[str, ...] = tuple(
    name for name, value in vars(hookspecs).items() if name.startswith(f"{hookspecs.PROJECT_NAME}_") and callable(value)
)


@attrs.frozen(kw_only=True)
class PluginInfo:
    """One plugin: where it comes from and whether it is usable.

    ``name`` is the plugin's unique name inside the manager. ``error`` says why a plugin has status
    ``error`` (import failure, misspelled hook, a hook that raised or returned something else than records).
    ``details`` is the full traceback, shown by ``--debug``.
    """

    name: str
    distribution: str
    version: str
    entry_point_name: str
    entry_point_value: str
    status: Status
    error: str | None = None
    details: str | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def entry_point(self) -> str:
        """The entry point as written in ``pyproject.toml`` (``name = module``)."""
        return f"{self.entry_point_name} = {self.entry_point_value}"

    @property
    def label(self) -> str:
        """``distribution version``: how messages name a plugin (conflicts name both sides this way)."""
        return f"{self.distribution} {self.version}"

    def failed(self, error: str, details: str | None = None) -> PluginInfo:
        """This plugin with status ``error``."""
        return attrs.evolve(self, status="error", error=error, details=details)


def canonical_name(name: str) -> str:
    """PEP 503 normalisation, so ``OMNI_RL_LOAD_PLUGINS=Acme_Losses`` matches distribution ``acme-losses``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_name_list(value: str | None) -> frozenset[str] | None:
    """``"a, b"`` → ``{"a", "b"}`` (canonicalised); unset or blank → None (no selection)."""
    if value is None or not value.strip():
        return None
    return frozenset(canonical_name(part.strip()) for part in value.split(",") if part.strip())


class PluginManager:
    """pluggy's manager plus the bookkeeping omni-rl needs (distribution, version, status of each plugin).

    A fresh ``PluginManager()`` has no plugins: tests register inline plugin objects with :meth:`register`
    (giving a fake distribution name and version for conflict messages); :func:`load_plugins` also loads the
    installed entry points.
    """

    def __init__(self) -> None:
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._infos: dict[str, PluginInfo] = {}
        #: things the user should know that are not a plugin's failure (an unmatched OMNI_RL_LOAD_PLUGINS name)
        self.warnings: list[str] = []

    # -- what is loaded ------------------------------------------------------------------------------------

    @property
    def hook(self) -> Any:
        """pluggy's hook relay (``pm.hook.omni_rl_losses()``)."""
        return self._pm.hook

    @property
    def infos(self) -> list[PluginInfo]:
        """Every plugin seen, in load order, including disabled and failed ones."""
        return list(self._infos.values())

    def info(self, name: str) -> PluginInfo:
        """The record of the plugin registered under ``name``."""
        return self._infos[name]

    def hook_implementations(self, hook_name: str) -> list[Any]:
        """pluggy's ``HookImpl`` objects of one hook, so callers can attribute each result to its plugin."""
        return list(getattr(self._pm.hook, hook_name).get_hookimpls())

    def mark_failed(self, name: str, error: str, details: str | None = None) -> None:
        """Record that a registered plugin turned out to be broken and drop its hooks."""
        plugin = self._pm.get_plugin(name)
        if plugin is not None:
            self._pm.unregister(plugin, name=name)
        self._infos[name] = self._infos[name].failed(error, details)

    # -- registration --------------------------------------------------------------------------------------

    def register(
        self,
        plugin: object,
        *,
        name: str | None = None,
        distribution: str = "inline",
        version: str = "0",
        entry_point_value: str | None = None,
    ) -> PluginInfo:
        """Register a plugin object (a module, class or instance with ``@hookimpl`` functions).

        Raises :class:`PluginError` when a hook name is misspelled or an implementation takes arguments the
        spec does not have; nothing is registered then.
        """
        plugin_name = name or getattr(plugin, "__name__", None) or f"plugin-{len(self._infos)}"
        if plugin_name in self._infos:
            raise PluginError(
                f"a plugin named {plugin_name!r} is already registered",
                hint="give each inline plugin its own name",
            )
        value = entry_point_value or getattr(plugin, "__name__", type(plugin).__name__)
        info = PluginInfo(
            name=plugin_name,
            distribution=distribution,
            version=version,
            entry_point_name=plugin_name,
            entry_point_value=value,
            status="active",
        )
        problem = self._try_register(plugin, plugin_name)
        if problem is not None:
            raise PluginError(f"plugin {info.label}: {problem[0]}", hint=_hooks_hint()) from problem[1]
        self._infos[plugin_name] = info
        return info

    def _try_register(self, plugin: object, name: str) -> tuple[str, BaseException | None] | None:
        """Register and vet one plugin; on a problem, unregister it and return (message, cause)."""
        try:
            self._pm.register(plugin, name=name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            # ValueError: pluggy refuses the same object under a second name; one line for the error column
            return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()), exc
        problems = list(_unknown_hooks(self._pm, plugin)) + list(_unmarked_hooks(self._pm, plugin))
        if problems:
            self._pm.unregister(plugin, name=name)
            return "; ".join(problems), None
        return None

    def check_pending(self) -> None:
        """Reject hook implementations without a spec (misspelled hook names) anywhere in the manager."""
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise PluginError(str(exc), hint=_hooks_hint()) from exc

    # -- entry points --------------------------------------------------------------------------------------

    def load_entry_points(
        self,
        environ: Mapping[str, str] | None = None,
        entry_points: Iterable[importlib.metadata.EntryPoint] | None = None,
    ) -> None:
        """Import every installed plugin of the ``omni_rl`` group, each in its own ``try``.

        ``environ`` defaults to ``os.environ`` (for the two selection variables); ``entry_points`` defaults
        to the installed ones and exists for tests.
        """
        environ = os.environ if environ is None else environ
        only = parse_name_list(environ.get(LOAD_ENV))
        disabled = parse_name_list(environ.get(DISABLE_ENV)) or frozenset()
        found = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if entry_points is None else entry_points
        # sorted, so listings and conflict messages do not depend on the order of directories on disk
        eps = sorted(((ep, _origin(ep)) for ep in found), key=lambda e: (canonical_name(e[1].distribution), e[0].name))
        matched: set[str] = set()
        for ep, origin in eps:
            keys = frozenset({canonical_name(ep.name), canonical_name(origin.distribution)})
            matched |= keys
            status: Status = "active"
            if keys & disabled or (only is not None and not keys & only):
                status = "disabled"
            self._load_one(ep, origin, status)
        for env, names in ((LOAD_ENV, only or frozenset()), (DISABLE_ENV, disabled)):
            for unknown in sorted(names - matched):
                self.warnings.append(
                    f"{env} names {unknown!r}, which is not an installed plugin" + _suggest(unknown, sorted(matched))
                )

    def _load_one(self, ep: importlib.metadata.EntryPoint, origin: _Origin, status: Status) -> None:
        name = f"{origin.distribution}:{ep.name}"
        info = PluginInfo(
            name=name,
            distribution=origin.distribution,
            version=origin.version,
            entry_point_name=ep.name,
            entry_point_value=ep.value,
            status=status,
        )
        if name in self._infos:  # the same distribution found twice on sys.path: the first one wins
            return
        self._infos[name] = info
        if status == "disabled":
            return
        if origin.problem is not None:  # a half-written install: do not import code we cannot attribute
            self._infos[name] = info.failed(origin.problem)
            return
        try:
            plugin = ep.load()
        except BaseException as exc:  # any import failure, SystemExit from a bad module included
            if isinstance(exc, KeyboardInterrupt):
                raise
            self._infos[name] = info.failed(describe_exception(exc), traceback.format_exc())
            return
        problem = self._try_register(plugin, name)
        if problem is not None:
            message, cause = problem
            details = "".join(traceback.format_exception(cause)) if cause is not None else None
            self._infos[name] = info.failed(message, details)


@attrs.frozen
class _Origin:
    """The distribution an entry point comes from; ``problem`` says why its metadata is unusable."""

    distribution: str
    version: str
    problem: str | None = None


def _origin(ep: importlib.metadata.EntryPoint) -> _Origin:
    """Name and version of ``ep``'s distribution; never raises.

    A broken install (a ``*.dist-info`` whose METADATA lacks ``Name``, or cannot be read) must not stop the
    other plugins from loading: it gets a stand-in name (from its folder, else the entry point) and a problem
    that makes it ``error``.
    """
    dist = ep.dist
    if dist is None:
        return _Origin("unknown", "unknown")
    folder = _metadata_folder(dist)
    folder_name, _, folder_version = folder.name.rsplit(".", 1)[0].partition("-") if folder else ("", "", "")
    where = f" ({folder})" if folder else ""
    try:
        metadata = dist.metadata
        name = metadata.get("Name") if metadata is not None else None
        version = metadata.get("Version") if metadata is not None else None
    except Exception as exc:  # an unreadable METADATA file
        name = version = None
        problem = f"cannot read the distribution's metadata{where}: {describe_exception(exc)}"
    else:
        problem = f"the distribution's METADATA{where} has no Name" if not name else None
    if problem is not None:
        problem += "; reinstall the distribution or remove that folder"
    return _Origin(
        distribution=str(name or folder_name or ep.name or "unknown"),
        version=str(version or folder_version or "unknown"),
        problem=problem,
    )


def _metadata_folder(dist: importlib.metadata.Distribution) -> Path | None:
    """The ``*.dist-info`` / ``*.egg-info`` folder of an installed distribution (None if it has none)."""
    path = getattr(dist, "_path", None)  # PathDistribution's folder; importlib.metadata has no public name for it
    return Path(path) if isinstance(path, (str, os.PathLike)) else None


def _suggest(name: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(name, candidates, n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _hooks_hint() -> str:
    return "the hooks are: " + ", ".join(HOOK_NAMES) + " (see docs/hooks.md)"


def _unknown_hooks(pm: pluggy.PluginManager, plugin: object) -> Iterator[str]:
    """Hook implementations whose name matches no spec: almost always a misspelling."""
    for caller in pm.get_hookcallers(plugin) or []:
        if caller.spec is not None:
            continue
        impls = [impl for impl in caller.get_hookimpls() if impl.plugin is plugin]
        if all(impl.optionalhook for impl in impls):
            continue
        yield f"unknown hook {caller.name!r}" + _suggest(caller.name, list(HOOK_NAMES))


def _unmarked_hooks(pm: pluggy.PluginManager, plugin: object) -> Iterator[str]:
    """Functions named like a hook but missing ``@hookimpl``: pluggy would silently ignore them."""
    registered = {caller.name for caller in pm.get_hookcallers(plugin) or []}
    for hook_name in HOOK_NAMES:
        if hook_name not in registered and callable(getattr(plugin, hook_name, None)):
            yield f"{hook_name} is not marked with @hookimpl (from omni_rl import hookimpl)"


def load_plugins(environ: Mapping[str, str] | None = None) -> PluginManager:
    """A manager with every installed plugin loaded (honouring the two selection variables)."""
    pm = PluginManager()
    pm.load_entry_points(environ)
    return pm
