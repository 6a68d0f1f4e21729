"""``omni-rl plugins``: what is installed, what each plugin provides, what failed and what conflicts.

It must work in exactly the situations where the other commands refuse to (conflicting or broken plugins),
so it only collects the registry and never validates it.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from omni_rl.cli.output import Output
from omni_rl.plugins import PluginInfo
from omni_rl.registry import Registry
from omni_rl.specs import KINDS

_STATUS_STYLE = {"active": "green", "disabled": "dim", "error": "bold red"}


def plugin_rows(registry: Registry) -> list[dict[str, Any]]:
    """The ``--json`` document: one object per plugin, always with exactly these keys."""
    return [
        {
            "distribution": info.distribution,
            "version": info.version,
            "entry_point": info.entry_point,
            "status": info.status,
            "error": info.error,
            "components": [
                {"kind": c.kind, "name": c.name, "summary": c.spec.summary} for c in registry.components_of(info)
            ],
        }
        for info in registry.plugins
    ]


def plugins_command(args: argparse.Namespace, output: Output, registry: Registry) -> int:
    for warning in registry.warnings:
        output.warning(warning)
    if args.json:
        output.plain(json.dumps(plugin_rows(registry), indent=2))
        return 0
    if not registry.plugins:
        output.print(Text("no omni-rl plugins are installed"))
        output.print(Text("hint: pip install omni-rl-flow-grpo omni-rl-sd3 omni-rl-diffusers omni-rl-rewards"))
        return 0
    output.print(_table(registry))
    if args.components:
        output.print(_components_table(registry))
    failed = [info for info in registry.plugins if info.status == "error"]
    if failed:
        # full lines, not a table column: an error folded into a narrow column cannot be read or grepped
        output.print(Text("plugins that failed to load (the others work):", style="bold red"))
        for info in failed:
            output.print(Text(f"  - {info.label} ({info.entry_point}): {info.error}", style="red"))
            if info.details:
                output.details(f"{info.label} ({info.entry_point}):\n{info.details}")
    if registry.conflicts:
        output.print(Text("conflicts (`omni-rl check` and `omni-rl run` refuse to start):", style="bold red"))
        for conflict in registry.conflicts:
            output.print(Text(f"  - {conflict.message}", style="red"))
    return 0


def _table(registry: Registry) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="plugins", title_justify="left")
    for column in ("distribution", "version", "status", "components"):
        table.add_column(column, no_wrap=True)
    table.add_column("entry point", overflow="fold")
    for info in registry.plugins:  # errors are listed in full under the table
        table.add_row(
            Text(info.distribution),
            Text(info.version),
            Text(info.status, style=_STATUS_STYLE.get(info.status, "")),
            _count_cell(registry, info),
            Text(info.entry_point),
        )
    return table


def _count_cell(registry: Registry, info: PluginInfo) -> Text:
    provided = registry.components_of(info)
    text = Text(str(len(provided)))
    conflicted = sum(registry.is_conflicted(c) for c in provided)
    if conflicted:
        text.append(f" ({conflicted} conflicting)", style="bold red")
    return text


def _components_table(registry: Registry) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="components", title_justify="left")
    for column in ("kind", "name", "distribution"):
        table.add_column(column, no_wrap=True)
    table.add_column("summary", overflow="fold")
    order = {kind: i for i, kind in enumerate(KINDS)}
    for component in sorted(registry.components, key=lambda c: (order[c.kind], c.name)):
        conflicted = registry.is_conflicted(component)
        style = "bold red" if conflicted else ""
        name = Text(component.name, style=style)
        if conflicted:
            name.append(" (conflict)", style=style)
        table.add_row(
            Text(component.kind, style=style),
            name,
            Text(component.plugin.label, style=style),
            Text(component.spec.summary, style="dim"),
        )
    return table
