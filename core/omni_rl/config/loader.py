"""Config loading: TOML → preset → pass 1 (the file's shape) → pass 2 (each component's options).

Both passes always run, and every problem of every section is collected into one :class:`ConfigError`, so a
user fixes a config in one round instead of one error per run. Pass 2 only needs a section's ``name`` and
``options`` to be usable, so a type error in ``[run]`` does not hide an unknown ``[loss]`` name.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import cattrs

from omni_rl.config.converter import shared_converter, structure
from omni_rl.config.overrides import Override, apply_overrides
from omni_rl.config.presets import PRESET_SECTIONS, apply_preset
from omni_rl.config.schema import COMPONENT_SECTIONS, ResolvedComponent, ResolvedConfig, TrainConfig
from omni_rl.config.toml import parse_toml, to_toml_value
from omni_rl.errors import ConfigError
from omni_rl.registry import Component, Registry
from omni_rl.specs import KINDS, ComponentSpec

#: Order of sections in the resolved file (and of problems in an error).
SECTION_ORDER: tuple[str, ...] = (
    "run",
    "cluster",
    "data",
    "algorithm",
    "model",
    "sampler",
    "rollout",
    "reward",
    "eval_reward",
    "advantage",
    "loss",
    "optim",
    "rollout_correction",
    "log",
)
_DOCS_HINT = "each line is a problem and its $.path in the file; docs/config.md lists every section and key"
_PLUGINS_HINT = "`omni-rl plugins --components` lists the installed components"


def load_config(
    path: str | Path, overrides: Iterable[str | Override] = (), registry: Registry | None = None
) -> ResolvedConfig:
    """Read, override, validate and resolve a config file.

    ``registry`` defaults to the installed plugins (:func:`omni_rl.get_registry`). Plugin conflicts raise
    :class:`~omni_rl.errors.PluginError`; every config problem raises one
    :class:`~omni_rl.errors.ConfigError` listing all of them.
    """
    raw = apply_overrides(parse_toml(path), overrides)
    if registry is None:
        from omni_rl.registry import get_registry

        registry = get_registry()
    registry.validate()
    return resolve_config(raw, registry, source=str(path))


def resolve_config(raw: Mapping[str, Any], registry: Registry, source: str = "<config>") -> ResolvedConfig:
    """Validate and resolve an already parsed (TOML-shaped) config."""
    conv = shared_converter()
    merged, problems, preset = apply_preset(dict(raw), registry)
    missing = _missing_sections(merged, raw, preset)
    problems += missing
    file, shape_problems = structure(conv, merged, TrainConfig, "$")
    # the file's `model` is required by the schema too: report it once, in our words; and with a preset that
    # could not be resolved, a component section without `name` is not wrong (it would take the preset's)
    ignored = {_cattrs_missing(m) for m in missing}
    if preset is None and isinstance(raw.get("algorithm"), Mapping):
        ignored |= {f"required field missing @ $.{key}.name" for key in COMPONENT_SECTIONS}
    problems += [p for p in shape_problems if p not in ignored]
    filled = _preset_filled(raw, merged, preset)
    chosen, component_problems = resolve_components(merged, registry, conv, filled)
    problems += component_problems
    if file is not None:
        problems += _sharding_problems(file)
        problems += _auto_batch_problems(file)
        problems += _speed_option_problems(file)
        problems += _cuda_only_problems(file)
        problems += _eval_reward_problems(file)
        problems += _component_check_problems(file, chosen)
    if problems or file is None:
        raise ConfigError(_problems_message(source, _in_file_order(problems, raw)), hint=_hint(problems, registry))
    resolved = _resolved_components(file, chosen)
    final_raw = _resolved_raw(conv, file, resolved, preset)
    return ResolvedConfig(
        file=conv.structure(final_raw, TrainConfig),
        components={kind: resolved[kind] for kind in COMPONENT_SECTIONS},
        rewards=[resolved[f"reward[{i}]"] for i in range(len(file.reward))],
        raw=final_raw,
        plugin_versions=[f"omni-rl=={core_version()}", *registry.plugin_versions()],
        eval_rewards=[resolved[f"eval_reward[{i}]"] for i in range(len(file.eval_reward))],
    )


def _sharding_problems(file: TrainConfig) -> list[str]:
    """Checks across [data] and [cluster]: a step's prompt groups are split whole over the workers."""
    per_step, workers = file.data.prompts_per_step, file.cluster.workers
    if per_step < workers:
        return [
            f"invalid value: prompts_per_step = {per_step} is fewer than [cluster] workers = {workers}: each worker "
            "samples whole prompt groups, so use at least one prompt per worker per step @ $.data.prompts_per_step"
        ]
    if file.cluster.strategy == "fsdp2" and per_step % workers:
        return [
            f'invalid value: [cluster] strategy = "fsdp2" needs prompts_per_step ({per_step}) to be a multiple of '
            f"[cluster] workers ({workers}): the sharded model's forwards are collective, so every worker must "
            f'sample the same number of prompt groups; set a multiple of {workers}, or strategy = "ddp" '
            "@ $.data.prompts_per_step"
        ]
    return []


def _auto_batch_problems(file: TrainConfig) -> list[str]:
    """``"auto"`` batch sizes are probed by each worker alone (omni_rl.auto_batch), so under FSDP2, whose forwards
    are collectives every worker must run as many times, workers could resolve different sizes and wait for ever."""
    if file.cluster.strategy != "fsdp2":
        return []
    autos = []
    if file.optim.micro_batch == "auto":
        autos.append("$.optim.micro_batch")
    if file.rollout is not None and file.rollout.options.get("batch_size") == "auto":
        autos.append("$.rollout.options.batch_size")
    return [
        'invalid value: "auto" is not supported with [cluster] strategy = "fsdp2" (each worker would probe its own '
        "size, and the sharded forwards must run in lockstep); set a number @ " + where
        for where in autos
    ]


def _speed_option_problems(file: TrainConfig) -> list[str]:
    """A compiled model (``[model] options.compile``) runs other kernels with gradients than without, and a graphed
    one (``options.cuda_graphs``) replays captured no-grad calls, so the first step's on-policy ratio is exactly 1
    only when the update recomputes the old log-probs (through its trained forward, omni_rl_pipelines.speed); the
    rollout's own log-probs would be off in the last bits. CUDA graphs read the weights where they were at capture,
    which FSDP2's per-forward all-gather into new memory breaks."""
    options = file.model.options
    graphs = options.get("cuda_graphs", False) is True
    speed_options = {  # option: (turned on, what it is, why the ratio would drift, how to turn it off)
        "compile": (
            options.get("compile", "off") != "off",
            "a compiled model",
            "compiled kernels differ with and without gradients",
            'compile = "off"',
        ),
        "cuda_graphs": (graphs, "cuda_graphs", "graphed calls are not the update's forward", "cuda_graphs = false"),
    }
    recomputed = file.optim.recompute_old_log_probs and file.rollout_correction.mode != "bypass"
    problems = [
        f"invalid value: {what} needs the old log-probs recomputed through the trained forward ({why}, so the "
        "rollout's log-probs would not give a ratio of exactly 1); set [optim] recompute_old_log_probs = true and "
        f'[rollout_correction] mode other than "bypass", or {off} @ $.model.options.{key}'
        for key, (on, what, why, off) in speed_options.items()
        if on and not recomputed
    ]
    if graphs and file.cluster.strategy == "fsdp2":
        problems.append(
            'invalid value: cuda_graphs does not work with [cluster] strategy = "fsdp2" (its forwards gather the '
            "sharded weights into new memory every call, and a graph replays the memory it was captured with); set "
            'cuda_graphs = false, or strategy = "ddp" @ $.model.options.cuda_graphs'
        )
    return problems


#: ``[model] options`` that need a CUDA GPU in the policy workers: (option, its values that do, what they are)
CUDA_ONLY_OPTIONS = (
    ("cuda_graphs", (True,), "graphs are captured and replayed on it"),
    ("attention_backend", ("flash", "cudnn", "efficient"), "a fused attention kernel"),
)


def _cuda_only_problems(file: TrainConfig) -> list[str]:
    """``cuda_graphs = true`` or a fused attention kernel with ``[cluster] gpus_per_worker = 0``: the policy workers
    run on the CPU, where the model refuses them when it is built (after Ray and the model load). Read by name, as
    every diffusers model adapter spells them (omni_rl_pipelines.speed)."""
    if file.cluster.gpus_per_worker > 0:
        return []
    options = file.model.options
    problems = []
    for key, values, what in CUDA_ONLY_OPTIONS:
        value = options.get(key)
        if any(value is v if isinstance(v, bool) else value == v for v in values):
            shown = "true" if value is True else f'"{value}"'
            off = "false" if value is True else '"default" (or "math")'
            problems.append(
                f"invalid value: {key} = {shown} needs a CUDA GPU ({what}), but [cluster] gpus_per_worker = 0 runs "
                f"the workers on the CPU; set {key} = {off}, or gpus_per_worker = 1 to train on GPUs "
                f"@ $.model.options.{key}"
            )
    return problems


def _eval_reward_problems(file: TrainConfig) -> list[str]:
    """An eval reward is scored at validation only: with validation off it would silently never run."""
    if file.eval_reward and not (file.run.eval_every or file.run.eval_before_training):
        return [
            "invalid value: [[eval_reward]] is scored at validation only, but validation is off; set [run] "
            "eval_every (and [data] val), or remove the [[eval_reward]] sections @ $.eval_reward"
        ]
    return []


def _component_check_problems(file: TrainConfig, chosen: Mapping[str, tuple[Component, Any]]) -> list[str]:
    """Checks across sections that components declare (``ComponentSpec.check``), e.g. a loss option that a
    sampler cannot serve. Sections with invalid options are left out: their own problems are already listed."""
    valid = {key: pair for key, pair in chosen.items() if pair[1] is not None}
    resolved = _resolved_components(file, valid)
    problems: list[str] = []
    for component in resolved.values():
        if component.spec.check is not None:  # once per section: a check that looks at every section repeats
            problems += [problem for problem in component.spec.check(resolved) if problem not in problems]
    return problems


def structure_options(spec: ComponentSpec, options: Mapping[str, Any] | Any, path: str | None = None) -> Any:
    """A component's options (a TOML-shaped table) structured into its config class, or a ConfigError."""
    if isinstance(options, spec.config):
        return options
    path = path or f"$.{spec.kind}.options"
    instance, problems = structure(shared_converter(), options, spec.config, path)
    if problems:
        count = _count(len(problems))
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise ConfigError(f"invalid options for {spec.kind} {spec.name!r} ({count}):\n{lines}", hint=_DOCS_HINT)
    return instance


def core_version() -> str:
    try:
        return importlib.metadata.version("omni-rl")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


# -- pass 2 ----------------------------------------------------------------------------------------------


def resolve_components(
    merged: Mapping[str, Any], registry: Registry, conv: cattrs.Converter, preset_note: Mapping[str, str]
) -> tuple[dict[str, tuple[Component, Any]], list[str]]:
    """Each usable component section's provider and structured options, keyed ``loss``, ``reward[0]``...

    ``preset_note`` marks sections the preset filled in, so an unknown name there says where it came from.
    Also resolves the ``[[reward]]`` tables of a serve config (omni_rl.serving.config).
    """
    sections: list[tuple[str, str, Any]] = [(kind, kind, merged.get(kind)) for kind in COMPONENT_SECTIONS]
    for table in ("reward", "eval_reward"):
        rewards = merged.get(table)
        if isinstance(rewards, list):
            sections += [("reward", f"{table}[{i}]", section) for i, section in enumerate(rewards)]
    chosen: dict[str, tuple[Component, Any]] = {}
    problems: list[str] = []
    for kind, key, section in sections:
        if not isinstance(section, Mapping) or not isinstance(section.get("name"), str):
            continue  # absent, or a shape problem pass 1 reports
        path = f"$.{key}"
        name = section["name"]
        conflict = registry.conflict(kind, name)
        if conflict is not None:
            problems.append(f"conflicting plugins: {conflict.message} @ {path}.name")
            continue
        component = registry.find(kind, name)
        if component is None:
            problems.append(f"{registry.unknown_problem(kind, name)}{preset_note.get(key, '')} @ {path}.name")
            continue
        options = section.get("options", {})
        if not isinstance(options, Mapping):
            continue
        instance, option_problems = structure(conv, options, component.spec.config, f"{path}.options")
        problems += option_problems
        chosen[key] = (component, instance)
    return chosen, problems


def _preset_filled(raw: Mapping[str, Any], merged: Mapping[str, Any], preset: Component | None) -> dict[str, str]:
    if preset is None:
        return {}
    note = f" (from algorithm {preset.name!r}, {preset.plugin.label})"
    filled = {key: note for key in COMPONENT_SECTIONS if key in merged and key not in raw}
    if "reward" not in raw and isinstance(merged.get("reward"), list):
        filled |= {f"reward[{i}]": note for i in range(len(merged["reward"]))}
    return filled


def _missing_sections(merged: Mapping[str, Any], raw: Mapping[str, Any], preset: Component | None) -> list[str]:
    unresolved_preset = preset is None and isinstance(raw.get("algorithm"), Mapping)
    problems = []
    for key in COMPONENT_SECTIONS:
        if key in merged or (unresolved_preset and key != "model"):
            continue
        problems.append(f"missing section [{key}] ({_no_preset(preset)}) @ $.{key}")
    if not merged.get("reward") and not unresolved_preset:
        problems.append(
            f"missing section [[reward]]: at least one reward is required ({_no_preset(preset)}) @ $.reward"
        )
    return problems


def _no_preset(preset: Component | None) -> str:
    if preset is None:
        return "and no [algorithm] preset fills it"
    return f"algorithm {preset.name!r} does not fill it"


def _cattrs_missing(problem: str) -> str:
    return "required field missing @ " + problem.rsplit(" @ ", 1)[1]


# -- the result ------------------------------------------------------------------------------------------


def _resolved_components(
    file: TrainConfig, chosen: Mapping[str, tuple[Component, Any]]
) -> dict[str, ResolvedComponent]:
    resolved = {}
    for key, (component, options) in chosen.items():
        extra: dict[str, Any] = {}
        if key.startswith("reward["):
            section = file.reward[int(key[len("reward[") : -1])]
            extra = {
                "weight": section.weight,
                "on_error": section.on_error,
                "max_invalid_steps": section.max_invalid_steps,
                "resources": dict(section.resources),
                "aggregate": section.aggregate,
            }
        elif key.startswith("eval_reward["):
            evaluated = file.eval_reward[int(key[len("eval_reward[") : -1])]
            extra = {
                "on_error": evaluated.on_error,
                "resources": dict(evaluated.resources),
                "aggregate": evaluated.aggregate,
            }
        resolved[key] = ResolvedComponent(
            kind=component.kind,
            name=component.name,
            spec=component.spec,
            options=options,
            path=f"$.{key}",
            plugin=component.plugin.label,
            **extra,
        )
    return resolved


def _resolved_raw(
    conv: cattrs.Converter,
    file: TrainConfig,
    resolved: Mapping[str, ResolvedComponent],
    preset: Component | None,
) -> dict[str, Any]:
    """The TOML-shaped config with every default written out: reloading it gives the same config."""
    plain = to_toml_value(conv.unstructure(file))
    document: dict[str, Any] = {}
    for key in SECTION_ORDER:
        if key == "algorithm":
            if preset is not None:
                document[key] = {"name": preset.name}
        elif key == "reward":
            document[key] = [_component_table(conv, resolved[f"reward[{i}]"]) for i in range(len(file.reward))]
        elif key == "eval_reward":
            if file.eval_reward:  # written only when used, so files without it read as before
                document[key] = [
                    _component_table(conv, resolved[f"eval_reward[{i}]"], weighted=False)
                    for i in range(len(file.eval_reward))
                ]
        elif key in COMPONENT_SECTIONS:
            document[key] = _component_table(conv, resolved[key])
        else:
            document[key] = plain[key]
    return document


def _component_table(conv: cattrs.Converter, component: ResolvedComponent, weighted: bool = True) -> dict[str, Any]:
    table: dict[str, Any] = {"name": component.name}
    if component.kind == "reward":
        if weighted:  # an [[eval_reward]] is in no weighted sum
            table["weight"] = component.weight
        table["on_error"] = component.on_error
        if weighted:  # an [[eval_reward]] never stops a run
            table["max_invalid_steps"] = component.max_invalid_steps
        if component.resources:
            table["resources"] = dict(component.resources)
        if component.aggregate != "mean":  # written only when set, so image configs resolve as before
            table["aggregate"] = component.aggregate
    table["options"] = to_toml_value(conv.unstructure(component.options))
    return table


# -- the error -------------------------------------------------------------------------------------------

_SECTION = re.compile(r"\$\.?([A-Za-z0-9_]*)")


def _in_file_order(problems: list[str], raw: Mapping[str, Any]) -> list[str]:
    """Problems sorted by where their section is in the file (then the usual section order); stable."""
    order = {key: i for i, key in enumerate(raw)}
    order.update({key: len(raw) + i for i, key in enumerate(PRESET_SECTIONS) if key not in order})

    def position(problem: str) -> int:
        found = _SECTION.match(problem.rsplit(" @ ", 1)[-1])
        section = found.group(1) if found else ""
        return order.get(section, -1 if not section else len(order))

    return sorted(problems, key=position)


def _problems_message(source: str, problems: list[str]) -> str:
    lines = "\n".join(f"  - {problem}" for problem in problems)
    return f"invalid config {source} ({_count(len(problems))}):\n{lines}"


def _count(n: int) -> str:
    return f"{n} problem{'s' if n != 1 else ''}"


def _hint(problems: list[str], registry: Registry) -> str:
    hints = [_DOCS_HINT]
    if any(p.startswith((*(f"unknown {kind} " for kind in KINDS), "conflicting plugins")) for p in problems):
        hints.append(_PLUGINS_HINT)
    if any(p.startswith("missing section") for p in problems):
        presets = ", ".join(registry.names("algorithm")) or "none installed"
        hints.append(f"add the missing sections, or an [algorithm] preset that fills them (presets: {presets})")
    return "; ".join(hints)
