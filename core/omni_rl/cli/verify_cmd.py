"""``omni-rl verify RUN_DIR``: a table of the run's checkpoints, exit 1 when any is damaged (omni_rl.rundir.verify)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich import box
from rich.table import Table
from rich.text import Text

from omni_rl.cli.output import Output
from omni_rl.registry import Registry

_STYLE = {"verified": "green", "damaged": "bold red", "unverifiable": "yellow"}


def verify_command(args: argparse.Namespace, output: Output, registry: Registry) -> int:
    from omni_rl.rundir.verify import verify_run

    run_dir = Path(args.run_dir)
    results, moved = verify_run(run_dir)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("step", "files", "status", "size"):
        table.add_column(column, justify="left" if column == "status" else "right")
    for result in results:
        step = f"{result.step} ({result.branch})" if result.branch else str(result.step)
        table.add_row(
            Text(step),
            Text(str(result.files)),
            Text(result.status, style=_STYLE[result.status]),
            Text(_size(result.size)),
        )
    output.print(table)
    damaged = [r for r in results if r.status == "damaged"]
    for result in damaged:  # one line each, below the table: never wrapped, easy to grep
        output.print(Text(f"step {result.step}: {result.path}: {result.problem}"))
    if moved:
        output.print(Text(f"{moved} checkpoint(s) were already moved to {run_dir / 'checkpoints' / 'damaged'}"))
    if any(r.status == "unverifiable" for r in results):
        output.warning("unverifiable checkpoints were written by an older omni-rl, without a manifest")
    if damaged:
        steps = ", ".join(str(r.step) for r in damaged)
        output.err.print(Text.assemble(("error: ", "bold red"), f"damaged checkpoint(s) of step {steps}"))
        output.err.print(
            Text.assemble(("hint: ", "yellow"), 'resume = "auto" skips them (and moves them to checkpoints/damaged/)')
        )
        return 1
    if not results:
        output.print(Text(f"{run_dir} has no checkpoints"))
    else:
        output.success(f"{len(results)} checkpoint(s): none damaged")
    return 0


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"
