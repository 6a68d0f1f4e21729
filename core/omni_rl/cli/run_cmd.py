"""``omni-rl run`` and ``omni-rl check``: the same loading and validation, then train or stop."""

from __future__ import annotations

import argparse

from rich import box
from rich.table import Table
from rich.text import Text

from omni_rl.cli.output import Output
from omni_rl.config import check_prompt_sources, load_config, resolved_toml
from omni_rl.config.schema import ResolvedConfig
from omni_rl.errors import RuntimeFailure
from omni_rl.registry import Registry
from omni_rl.train.frame_counts import check_frame_counts
from omni_rl.train.preflight import preflight

#: Modules whose absence means "the training extra is not installed", not a bug.
_TRAIN_DEPENDENCIES = ("torch", "ray", "safetensors", "omni_rl.train.trainer", "omni_rl.runtime")


def check_command(args: argparse.Namespace, output: Output, registry: Registry) -> int:
    config = _load(args, output, registry)
    check_prompt_sources(config, source=str(args.config))  # `run` reads them when training starts
    preflight(config, source=str(args.config))  # model path, API-key variables, output_dir, resume: no weights
    output.success(f"{args.config}: config is valid")
    output.print(_components_table(config, registry))
    return 0


def run_command(args: argparse.Namespace, output: Output, registry: Registry) -> int:
    config = _load(args, output, registry)
    if args.print_config:
        output.plain(resolved_toml(config))
        return 0
    # a video pipeline's frame count, read from its local VAE config: refused before the run directory exists, not
    # by a worker in step 1 after Ray and the model started (the rest of `check`'s preflight is left to the workers,
    # which may see other paths and variables than this machine when they run on a cluster)
    check_frame_counts(config, source=str(args.config))
    try:
        from omni_rl.train.trainer import train
    except ImportError as exc:
        if exc.name not in _TRAIN_DEPENDENCIES and not (exc.name or "").startswith(_TRAIN_DEPENDENCIES):
            raise
        raise RuntimeFailure(
            f"training needs {exc.name!r}, which is not importable ({exc})",
            hint="install the training extra: pip install 'omni-rl[train]'",
        ) from exc
    run_dir = train(config)
    output.success(f"run finished: {run_dir}")
    return 0


def _load(args: argparse.Namespace, output: Output, registry: Registry) -> ResolvedConfig:
    output.plugin_warnings(registry)
    return load_config(args.config, args.set or (), registry)


def _components_table(config: ResolvedConfig, registry: Registry) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("section", "component", "provided by"):
        table.add_column(column, overflow="fold")
    if config.file.algorithm is not None:
        table.add_row(*_row("algorithm", "algorithm", config.file.algorithm.name, registry))
    for kind, component in config.components.items():
        table.add_row(*_row(kind, kind, component.name, registry))
    for i, reward in enumerate(config.rewards):
        table.add_row(*_row(f"reward[{i}]", "reward", reward.name, registry))
    for i, reward in enumerate(config.eval_rewards):
        table.add_row(*_row(f"eval_reward[{i}]", "reward", reward.name, registry))
    return table


def _row(section: str, kind: str, name: str, registry: Registry) -> tuple[Text, Text, Text]:
    found = registry.find(kind, name)
    provider = found.plugin.label if found is not None else ""
    return Text(section), Text(name), Text(provider)
