"""The component registry: collect → validate → look up, with messages that say what to do.

Collecting and validating are separate on purpose: ``omni-rl plugins`` must list everything even when two
plugins conflict (that is when a user needs the listing most), while ``check`` and ``run`` refuse to start.
Two providers of one name (or alias) are never resolved by load order, overwritten or renamed: every conflict
is reported at once, naming both distributions and versions.
"""

from __future__ import annotations

import difflib
import importlib
import threading
import traceback
from collections.abc import Iterable, Sequence

import attrs

from omni_rl.errors import PluginError, describe_exception
from omni_rl.plugins import DISABLE_ENV, PluginInfo, PluginManager
from omni_rl.specs import KINDS, SPEC_BY_KIND, SPEC_CLASSES, ComponentSpec

#: First-party distributions to suggest when no installed plugin provides a kind at all.
SUGGESTED_DISTRIBUTION: dict[str, str] = {
    "algorithm": "omni-rl-flow-grpo",
    "model": "omni-rl-sd3",
    "sampler": "omni-rl-flow-grpo",
    "rollout": "omni-rl-diffusers",
    "reward": "omni-rl-rewards",
    "advantage": "omni-rl-flow-grpo",
    "loss": "omni-rl-flow-grpo",
    "benchmark": "omni-rl-geneval",
}


@attrs.frozen(kw_only=True, eq=False)
class Component:
    """A spec record and the plugin that provided it (compared by identity: one per collected record)."""

    kind: str
    spec: ComponentSpec
    plugin: PluginInfo

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def keys(self) -> tuple[str, ...]:
        """The names this component answers to: its name, then its aliases."""
        return (self.spec.name, *(a for a in self.spec.aliases if a != self.spec.name))


@attrs.frozen(kw_only=True)
class Conflict:
    """One name (or alias) of one kind with more than one provider."""

    kind: str
    name: str
    providers: tuple[Component, ...]

    @property
    def message(self) -> str:
        labels = [_provider_label(c, self.name, self.providers) for c in self.providers]
        who = ", ".join(labels[:-1]) + f" and {labels[-1]}"
        if len(labels) == 2:
            who = f"both {who}"
        return f"{self.kind} {self.name!r} is provided by {who}"


def _provider_label(component: Component, key: str, others: Sequence[Component]) -> str:
    label = component.plugin.label
    if sum(other.plugin.label == label for other in others) > 1:  # two entry points of one distribution
        label += f" (entry point {component.plugin.entry_point_name!r})"
    if key != component.spec.name:
        label += f" (alias of {component.spec.name!r})"
    return label


class Registry:
    """Every component of every active plugin, by kind and name.

    Build it with :meth:`collect`; call :meth:`validate` before using it for a run.
    """

    def __init__(
        self, plugins: Sequence[PluginInfo], components: Sequence[Component], warnings: Sequence[str] = ()
    ) -> None:
        self.plugins: tuple[PluginInfo, ...] = tuple(plugins)
        self.components: tuple[Component, ...] = tuple(components)
        #: notes for the user that are not a plugin's failure (an unmatched OMNI_RL_LOAD_PLUGINS name)
        self.warnings: tuple[str, ...] = tuple(warnings)
        self._by_key: dict[str, dict[str, list[Component]]] = {kind: {} for kind in KINDS}
        for component in self.components:
            for key in component.keys:
                self._by_key[component.kind].setdefault(key, []).append(component)
        self.conflicts: tuple[Conflict, ...] = tuple(self._find_conflicts())

    # -- building ------------------------------------------------------------------------------------------

    @classmethod
    def collect(cls, pm: PluginManager) -> Registry:
        """Call every hook of every active plugin, one implementation at a time.

        A hook that raises, returns something other than records of its kind, or repeats a name makes its
        plugin ``error`` (reported with the hook and the distribution); its components are left out.
        """
        collected: dict[str, list[Component]] = {}
        for spec_cls in SPEC_CLASSES:
            for impl in pm.hook_implementations(spec_cls.hook):
                info = pm.info(impl.plugin_name)
                if info.status != "active":
                    continue
                try:
                    records = _call_hook(impl, spec_cls)
                except _HookProblem as problem:
                    pm.mark_failed(impl.plugin_name, f"{spec_cls.hook}: {problem}", problem.details)
                    collected.pop(impl.plugin_name, None)
                    continue
                collected.setdefault(impl.plugin_name, []).extend(
                    Component(kind=spec_cls.kind, spec=record, plugin=info) for record in records
                )
        for plugin_name, components in list(collected.items()):
            duplicates = _duplicates(components)
            if duplicates:
                pm.mark_failed(plugin_name, "provides " + ", ".join(duplicates) + " more than once")
                del collected[plugin_name]
        components = [component for info in pm.infos for component in collected.get(info.name, [])]
        return cls(pm.infos, components, pm.warnings)

    def _find_conflicts(self) -> Iterable[Conflict]:
        seen: set[tuple[str, frozenset[int]]] = set()
        for kind in KINDS:
            # canonical names first, so an alias clash of the same two providers is not reported twice
            keys = sorted(self._by_key[kind], key=lambda k: (not self._is_canonical(kind, k), k))
            for key in keys:
                providers = self._by_key[kind][key]
                if len(providers) < 2:
                    continue
                identity = (kind, frozenset(id(c) for c in providers))
                if identity in seen:
                    continue
                seen.add(identity)
                yield Conflict(kind=kind, name=key, providers=tuple(providers))

    def _is_canonical(self, kind: str, key: str) -> bool:
        return any(c.spec.name == key for c in self._by_key[kind][key])

    # -- checking ------------------------------------------------------------------------------------------

    def validate(self) -> None:
        """Raise :class:`PluginError` listing every conflict, or return if there is none."""
        if not self.conflicts:
            return
        lines = "\n".join(f"  - {conflict.message}" for conflict in self.conflicts)
        raise PluginError(f"conflicting plugins:\n{lines}", hint=_conflict_hint(self.conflicts[0].providers))

    def is_conflicted(self, component: Component) -> bool:
        return any(len(self._by_key[component.kind][key]) > 1 for key in component.keys)

    # -- lookup --------------------------------------------------------------------------------------------

    def names(self, kind: str) -> list[str]:
        """Canonical names of ``kind``, sorted."""
        return sorted({c.spec.name for c in self.components if c.kind == kind})

    def specs(self, kind: str) -> list[ComponentSpec]:
        """Every record of ``kind`` (conflicting ones included), in load order."""
        return [c.spec for c in self.components if c.kind == kind]

    def components_of(self, plugin: PluginInfo | str) -> list[Component]:
        name = plugin if isinstance(plugin, str) else plugin.name
        return [c for c in self.components if c.plugin.name == name]

    def find(self, kind: str, name: str) -> Component | None:
        """The one provider of ``name`` (or alias), None if unknown; a conflicting name raises."""
        conflict = self.conflict(kind, name)
        if conflict is not None:
            raise PluginError(f"conflicting plugins:\n  - {conflict.message}", hint=_conflict_hint(conflict.providers))
        providers = self._by_key[kind].get(name, [])
        return providers[0] if providers else None

    def conflict(self, kind: str, name: str) -> Conflict | None:
        """The conflict over ``name`` (or alias) of ``kind``, if more than one plugin provides it."""
        _check_kind(kind)
        providers = self._by_key[kind].get(name, [])
        return Conflict(kind=kind, name=name, providers=tuple(providers)) if len(providers) > 1 else None

    def get(self, kind: str, name: str) -> ComponentSpec:
        """The spec of ``kind`` called ``name`` (or an alias); unknown names raise with a suggestion."""
        component = self.find(kind, name)
        if component is None:
            message, hint = self.unknown(kind, name)
            raise PluginError(message, hint=hint)
        return component.spec

    def unknown(self, kind: str, name: str) -> tuple[str, str]:
        """(message, hint) for a name nobody provides: the closest names, what exists, what failed."""
        _check_kind(kind)
        tail = self._failed_tail()
        hint = "`omni-rl plugins --components` lists every plugin and what it provides"
        available = sorted(self._by_key[kind])
        if not available:
            return (
                f"unknown {kind} {name!r}: no installed plugin provides {_article(kind)} {kind}{tail}",
                f"{_install_advice(kind)}; {hint}",
            )
        close = suggest(name, available)
        lead = f"; did you mean {close!r}? " if close else "; "
        return f"unknown {kind} {name!r}{lead}available: {', '.join(self.names(kind))}{tail}", hint

    def unknown_problem(self, kind: str, name: str) -> str:
        """:meth:`unknown` as one line of a config error, which has a single hint for all its lines: when no
        installed plugin provides the kind at all, the line itself says what to install."""
        message, _ = self.unknown(kind, name)
        if self._by_key[kind]:
            return message
        tail = self._failed_tail()
        return message.removesuffix(tail) + f" ({_install_advice(kind)}){tail}"

    def _failed_tail(self) -> str:
        failed = [info for info in self.plugins if info.status == "error"]
        if not failed:
            return ""
        return "; plugins that failed to load: " + ", ".join(f"{i.label} ({i.error})" for i in failed)

    def plugin_versions(self) -> list[str]:
        """``distribution==version`` of every plugin distribution, sorted and without repeats (``plugins.txt``).

        Disabled and failed plugins are listed too, marked with a pip comment (``name==1.0  # disabled``,
        ``name==1.0  # error: <why>``): a run's record must show what was installed but not used, since a
        plugin that failed to load can change what a name resolves to on another machine.
        """
        by_distribution: dict[tuple[str, str], list[PluginInfo]] = {}
        for info in self.plugins:
            by_distribution.setdefault((info.distribution, info.version), []).append(info)
        lines = []
        for (distribution, version), infos in sorted(by_distribution.items()):
            errors = [" ".join((i.error or "failed").split()) for i in infos if i.status == "error"]
            if errors:
                comment = "  # error: " + "; ".join(errors)
            elif any(i.status == "active" for i in infos):
                comment = ""
            else:
                comment = "  # disabled"
            lines.append(f"{distribution}=={version}{comment}")
        return lines


class _HookProblem(Exception):
    def __init__(self, message: str, details: str | None = None) -> None:
        super().__init__(message)
        self.details = details


def _call_hook(impl: object, spec_cls: type[ComponentSpec]) -> list[ComponentSpec]:
    """Call one plugin's implementation of one hook and check what it returned."""
    if getattr(impl, "wrapper", False) or getattr(impl, "hookwrapper", False):
        raise _HookProblem("hook wrappers are not supported; return spec records instead")
    try:
        result = impl.function()  # type: ignore[attr-defined]
        records = [] if result is None else list(result)
    except Exception as exc:
        raise _HookProblem(f"raised {describe_exception(exc)}", traceback.format_exc()) from exc
    for record in records:
        if not isinstance(record, spec_cls):
            got = type(record).__name__
            what = f"{got} {record.name!r}" if isinstance(record, ComponentSpec) else got
            raise _HookProblem(f"returned a {what}; expected {spec_cls.__name__} records")
    return records


def _duplicates(components: Sequence[Component]) -> list[str]:
    seen: set[tuple[str, str]] = set()
    duplicates: list[str] = []
    for component in components:
        for key in component.keys:
            if (component.kind, key) in seen:
                duplicates.append(f"{component.kind} {key!r}")
            seen.add((component.kind, key))
    return duplicates


def suggest(name: str, candidates: Sequence[str]) -> str | None:
    """The closest candidate to a mistyped name: a dotted name ending in it first, then difflib's best."""
    lowered = name.lower()
    if lowered in candidates and lowered != name:
        return lowered
    dotted = [c for c in candidates if c.endswith(f".{lowered}")]
    if len(dotted) == 1:
        return dotted[0]
    close = difflib.get_close_matches(lowered, list(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


def _article(word: str) -> str:
    """The article for a kind name: "an algorithm", "an advantage", "a model" (vowel letters suffice here)."""
    return "an" if word[:1].lower() in "aeiou" else "a"


def _install_advice(kind: str) -> str:
    suggested = SUGGESTED_DISTRIBUTION.get(kind, "a plugin")
    return f"install a plugin that provides one, e.g. pip install {suggested}"


def _check_kind(kind: str) -> None:
    if kind not in SPEC_BY_KIND:
        close = suggest(kind, KINDS)
        guess = f"; did you mean {close!r}?" if close else ""
        raise PluginError(f"unknown component kind {kind!r}{guess}", hint=f"kinds are: {', '.join(KINDS)}")


def _conflict_hint(providers: Sequence[Component]) -> str:
    last = providers[-1].plugin
    return (
        "component names are never overwritten or renamed: uninstall one of the distributions "
        f"(pip uninstall {last.distribution}) or switch one off with {DISABLE_ENV}={last.distribution}; "
        "`omni-rl plugins` lists every plugin"
    )


_lock = threading.Lock()
_registry: Registry | None = None


def get_registry(reload: bool = False) -> Registry:
    """The registry of the installed plugins, loaded on first use and cached for the process.

    ``reload=True`` loads the entry points again (after ``pip install`` in a notebook, or after changing
    ``OMNI_RL_LOAD_PLUGINS``). Conflicts are not raised here: call ``registry.validate()`` for that.
    """
    global _registry
    with _lock:
        if _registry is None or reload:
            from omni_rl.plugins import load_plugins

            importlib.invalidate_caches()  # see distributions pip installed since the last load
            _registry = Registry.collect(load_plugins())
        return _registry


def set_registry(registry: Registry | None) -> None:
    """Replace the cached registry (tests use an isolated one); None drops it so the next use reloads."""
    global _registry
    with _lock:
        _registry = registry
