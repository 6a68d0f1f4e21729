"""The model, sampler and rollout backend ``omni-rl eval`` samples with, from a run or a pipeline directory.

A run directory is sampled exactly as its validation was: its own ``config.resolved.toml`` says which model,
sampler and rollout plugins and options (resolution, ``eval_steps``, ``eval_cfg``), and a checkpoint's LoRA is
loaded into the model (as ``omni-rl export`` does). A pipeline directory has no run config, so a small default
table stands in: the model plugin named by the pipeline's class (``model_index.json``), the ``ode`` sampler
and the ``diffusers`` rollout with its defaults; ``--set`` changes any of it (``rollout.options.eval_steps=40``).
Only component *names* appear here: the plugins are looked up in the registry, never imported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError
from omni_rl.registry import Registry

#: diffusers pipeline class (``model_index.json`` ``_class_name``) -> the model component that loads it
MODEL_BY_PIPELINE: dict[str, str] = {
    "StableDiffusion3Pipeline": "sd3",
    "QwenImagePipeline": "qwen_image",
    "FluxPipeline": "flux",
    "FluxKontextPipeline": "flux_kontext",
    "Flux2KleinPipeline": "flux2_klein",
    "QwenImage21Pipeline": "qwen_image21",
    "QwenImageEditPipeline": "qwen_image_edit",
    "QwenImageEditPlusPipeline": "qwen_image_edit_plus",
    "ZImagePipeline": "z_image",
}
_TARGET_HINT = (
    "pass a run directory (the [run] output_dir of a training run) or a diffusers pipeline directory "
    "(holding model_index.json)"
)


@attrs.frozen(kw_only=True)
class Generator:
    """What samples the benchmark's images, and where it came from (written to ``eval_info.json``)."""

    model: Any
    sampler: Any
    rollout: Any
    #: JSON-able description: target, kind ("run" / "pipeline"), step, the three components' names and options
    info: dict[str, Any]


def load_generator(
    target: str | Path,
    *,
    step: int | None,
    overrides: Iterable[str],
    registry: Registry,
    device: str,
    pipeline_defaults: Iterable[str] = (),
) -> Generator:
    """Build the generator of ``target`` (a run directory, or a pipeline directory) on ``device``.

    ``pipeline_defaults``: overrides applied before ``overrides`` to a pipeline directory's default tables only
    (a benchmark's ``pipeline_overrides``); a run directory keeps its own config."""
    path = Path(target)
    if target_kind(path, step) == "run":
        return _from_run(path, step, list(overrides), registry, device)
    return _from_pipeline(path, [*pipeline_defaults, *overrides], registry, device)


def target_kind(target: Path, step: int | None = None) -> str:
    """``"run"`` (holds ``config.resolved.toml``) or ``"pipeline"`` (holds ``model_index.json``); a ConfigError
    for anything else, or for ``--step`` with a pipeline."""
    from omni_rl.config import RESOLVED_CONFIG

    if (target / RESOLVED_CONFIG).is_file():
        return "run"
    if (target / "model_index.json").is_file():
        if step is not None:
            raise ConfigError("--step applies to a run directory, not a pipeline directory", hint=_TARGET_HINT)
        return "pipeline"
    raise ConfigError(
        f"{str(target)!r} is neither an omni-rl run directory nor a pipeline directory", hint=_TARGET_HINT
    )


def check_generator_config(
    target: Path, overrides: Iterable[str], registry: Registry, pipeline_defaults: Iterable[str] = ()
) -> None:
    """Resolve what :func:`load_generator` would build, without building it (no weight is read): a ``--set`` that
    does not fit is refused before ``omni-rl eval`` writes or loads anything."""
    from omni_rl.config import RESOLVED_CONFIG, load_config, structure_options
    from omni_rl.config.overrides import apply_overrides

    if target_kind(target) == "run":
        load_config(target / RESOLVED_CONFIG, list(overrides), registry)
        return
    tables = apply_overrides(default_tables(target), [*pipeline_defaults, *overrides])
    for kind in ("model", "sampler", "rollout"):
        table = tables.get(kind, {})
        if kind == "model" and not table.get("name"):
            return  # _from_pipeline names the fix
        structure_options(registry.get(kind, str(table.get("name", ""))), table.get("options", {}), f"$.{kind}.options")


def _from_run(run_dir: Path, step: int | None, overrides: list[str], registry: Registry, device: str) -> Generator:
    from omni_rl.config import RESOLVED_CONFIG, load_config
    from omni_rl.rundir.checkpoint import verify_model_files
    from omni_rl.rundir.export import find_checkpoint

    step, checkpoint = find_checkpoint(run_dir, step)
    reader = verify_model_files(checkpoint)  # a damaged checkpoint is refused before the model is built
    config = load_config(run_dir / RESOLVED_CONFIG, overrides, registry)
    ctx = BuildContext(device=device, seed=config.run.seed, run_dir=run_dir, registry=registry)
    built = {kind: config.components[kind].build(ctx) for kind in ("model", "sampler", "rollout")}
    built["model"].load_lora(reader.directory)
    info = {
        "target": str(run_dir.resolve()),
        "kind": "run",
        "step": step,
        "checkpoint": str(checkpoint.resolve()),
        **{kind: _describe(config.components[kind]) for kind in built},
    }
    return Generator(model=built["model"], sampler=built["sampler"], rollout=built["rollout"], info=info)


def _from_pipeline(directory: Path, overrides: list[str], registry: Registry, device: str) -> Generator:
    from omni_rl.config import structure_options
    from omni_rl.config.overrides import apply_overrides

    tables = apply_overrides(default_tables(directory), overrides)
    if not tables.get("model", {}).get("name"):
        raise ConfigError(
            f"{str(directory)!r}: no model plugin is known for its pipeline class (model_index.json _class_name)",
            hint="name the model component with --set model.name=NAME (`omni-rl plugins --components` lists them)",
        )
    ctx = BuildContext(device=device, registry=registry)
    built: dict[str, Any] = {}
    info: dict[str, Any] = {"target": str(directory.resolve()), "kind": "pipeline", "step": None}
    for kind in ("model", "sampler", "rollout"):
        table = tables.get(kind, {})
        spec = registry.get(kind, str(table.get("name", "")))
        options = structure_options(spec, table.get("options", {}), f"$.{kind}.options")
        built[kind] = spec.factory(options, attrs.evolve(ctx, section=f"$.{kind}"))
        info[kind] = {"name": spec.name, "options": dict(table.get("options", {}))}
    return Generator(model=built["model"], sampler=built["sampler"], rollout=built["rollout"], info=info)


def default_tables(directory: Path) -> dict[str, Any]:
    """The config tables a pipeline directory is sampled with before ``--set``: model by pipeline class."""
    try:
        index = json.loads((directory / "model_index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {directory / 'model_index.json'}: {exc}", hint=_TARGET_HINT) from exc
    pipeline = str(index.get("_class_name", "")) if isinstance(index, Mapping) else ""
    model = MODEL_BY_PIPELINE.get(pipeline, "")
    return {
        "model": {"name": model, "options": {"path": str(directory)}},
        "sampler": {"name": "ode"},
        "rollout": {"name": "diffusers"},
    }


def _describe(component: Any) -> dict[str, Any]:
    """A resolved component as ``{"name", "options"}`` (its options as the TOML table they came from)."""
    options = attrs.asdict(component.options) if attrs.has(type(component.options)) else {}
    return {"name": component.name, "options": options}
