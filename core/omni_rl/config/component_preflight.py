"""Each component's own ``spec.preflight`` (:class:`omni_rl.specs.ComponentSpec`), given the prompts it will see.

A component's options can be valid and its run still fail at its first call, for reasons only the component knows
and only this machine shows: a reward's weights that cannot be loaded (the hub off and the model not in the local
cache), prompt metadata the reward scores against but the prompt file lacks. ``omni-rl check`` asks each component
through its spec, with the prompt records it would be given (read with the trainer's reader), and lists the lines
with its other problems; ``serve-reward`` asks each served reward before it starts a local Ray (a served reward gets
its prompts with each request, so none are passed). Never run on a config only being loaded (``export``, ``eval``
of a run): those do not build the components, and another machine may hold their weights.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from omni_rl.config.schema import ResolvedComponent, ResolvedConfig
from omni_rl.data import PromptRecord, read_prompt_source
from omni_rl.errors import ConfigError


def component_preflight_problems(config: ResolvedConfig) -> list[str]:
    """The problems every component's ``spec.preflight`` finds: the trained rewards and the other components see
    the training prompts and, when validation is on, the val prompts; the ``[[eval_reward]]`` sections the val
    prompts only (what the trainer gives each of them)."""
    rewards = (*config.components.values(), *config.rewards)
    if not any(component.spec.preflight is not None for component in (*rewards, *config.eval_rewards)):
        return []  # no prompt file is read again when nothing asks for it
    data, run = config.data, config.run
    train = _records(data.train, "$.data.train")
    val = _records(data.val, "$.data.val", data.val_prompts) if run.eval_every or run.eval_before_training else {}
    problems = []
    for component in rewards:
        problems += spec_preflight(component, {**train, **val})
    for component in config.eval_rewards:
        problems += spec_preflight(component, val)
    return problems


def served_preflight_problems(components: Iterable[ResolvedComponent]) -> list[str]:
    """The problems the served rewards' ``spec.preflight`` find on this machine (no prompts: they come per request)."""
    return [problem for component in components for problem in spec_preflight(component, {})]


def spec_preflight(component: ResolvedComponent, prompts: Mapping[str, Sequence[PromptRecord]]) -> list[str]:
    """``component.spec.preflight(component, prompts)`` as problem lines; a preflight that raises is a problem of its
    own, blamed on the component's plugin (a check must not end ``omni-rl check`` with a traceback)."""
    preflight = getattr(component.spec, "preflight", None)
    if preflight is None:
        return []
    where = component.path or f"$.{component.kind}"
    try:
        return [str(problem) for problem in preflight(component, prompts)]
    except ConfigError as exc:
        return [exc.message if " @ " in exc.message else f"{exc.message} @ {where}"]
    except Exception as exc:  # a bug in the plugin's check, not in the config: say whose
        plugin = f" ({component.plugin})" if component.plugin else ""
        return [
            f"{component.kind} {component.name!r}{plugin}: its preflight check failed with {type(exc).__name__}: "
            f"{exc}; report it to the plugin, or remove the section @ {where}"
        ]


def _records(source: str, path: str, limit: int = 0) -> dict[str, list[PromptRecord]]:
    """``{path: records}`` of a prompt source, ``{}`` when unset or unreadable (``check`` reports that itself)."""
    if not source:
        return {}
    try:
        records = read_prompt_source(source, config_path=path)
    except ConfigError:
        return {}
    return {path: records[:limit] if limit else records}
