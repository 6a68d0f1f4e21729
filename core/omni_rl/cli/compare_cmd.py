"""``omni-rl compare RUN_DIR RUN_DIR...``: one overlay PNG of the runs' reward curves and a summary table each."""

from __future__ import annotations

import argparse
from pathlib import Path

import attrs
from rich.text import Text

from omni_rl.cli.output import Output
from omni_rl.compare import difference_labels, plot_comparison
from omni_rl.registry import Registry
from omni_rl.run_summary import read_config, summarize_run, summary_paths, summary_table


def run_compare(args: argparse.Namespace, output: Output, registry: Registry) -> int:
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
