"""``omni-rl compare RUN_DIR RUN_DIR...``: one overlay PNG of the runs' reward curves and a summary table each."""

from __future__ import annotations

import argparse
from pathlib import Path

import attrs
from rich.text import Text

from omni_rl.cli.output import Output
from omni_rl.errors import ConfigError
from omni_rl.registry import Registry
from omni_rl.reporting.compare import difference_labels, plot_comparison
from omni_rl.reporting.run_summary import read_config, summarize_run, summary_paths, summary_table
from omni_rl.rundir.writable import writable_file
from omni_rl.validators import is_finite_number


def compare_command(args: argparse.Namespace, output: Output, registry: Registry) -> int:
    # usage errors before any run is read: exit 2 with the option named, not a raw exception from the plot
    if not (is_finite_number(args.ema) and 0.0 <= args.ema < 1.0):
        raise ConfigError(
            f"--ema {args.ema} is not an EMA factor: it must be in [0, 1)",
            hint="0 draws the raw train reward; 0.9 (the default) and 0.99 smooth it more",
        )
    writable_file(args.out, "--out", "compare.png")
    dirs = [Path(d) for d in args.run_dirs]
    unlabelled = [summarize_run(d) for d in dirs]  # a directory that is not a run stops here (exit 2)
    labels = difference_labels([read_config(d) for d in dirs], [s.label for s in unlabelled])
    summaries = [attrs.evolve(s, label=label) for s, label in zip(unlabelled, labels, strict=True)]
    out = plot_comparison(summaries, Path(args.out), factor=args.ema)
    output.print(summary_table(summaries))
    for summary in summaries:
        for name, where in summary_paths(summary):
            output.print(Text.assemble((f"{summary.label}: {name}: ", "dim"), where))
    output.success(f"wrote {out}")
    return 0
