"""The importance ratio's mean per denoising step, run against run: GRPO-Guard's claim against Flow-GRPO.

GRPO-Guard (arXiv 2510.22319) reports that Flow-GRPO's per-step ratio is shifted below 1, by a different amount
at each step, so the clip fails to restrain positive-advantage updates and the policy over-optimises the proxy
reward. Every policy-gradient loss of omni-rl logs ``actor/ratio_mean/step_<j>`` (the ratio's mean over the
samples at schedule step j), and ``grpo_guard`` also logs its raw ratio as ``actor/ratio_mean_raw/step_<j>``.
This script reads the ``metrics.jsonl`` of two or more run directories and writes, per run and per step j, the
mean of ρ − 1 over the whole run and over its last quarter (where over-optimisation shows):

    python benchmarks/ratio_per_timestep.py runs/quickstart_mb16 runs/shapes_grpo_guard --out ratio.md --png ratio.png

A run is labelled by its ``[loss] name`` (from ``config.resolved.toml``), or by ``DIR=LABEL``. Compare runs of the
same length and batch cut (``optim.mini_batch``): with one optimizer step per training step every ratio is exactly 1.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import attrs

#: the per-step series a run may have: the loss's ratio, and grpo_guard's ratio before RatioNorm
SERIES = {"actor/ratio_mean": "", "actor/ratio_mean_raw": " (raw)"}
_STEP_KEY = re.compile(r"^(actor/ratio_mean(?:_raw)?)/step_(\d+)$")


@attrs.frozen
class Series:
    """One line of the table: a run's per-step ratio means, each a list over training steps in order."""

    label: str
    values: dict[int, list[float]]

    def mean(self, j: int) -> float:
        return _mean(self.values.get(j, []))

    def last_quarter(self, j: int) -> float:
        """The mean over the last ceil(n/4) of the n training steps that logged step j."""
        values = self.values.get(j, [])
        return _mean(values[-math.ceil(len(values) / 4) :] if values else [])


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def run_label(run_dir: Path) -> str:
    """The run's ``[loss] name`` from its resolved config, or the directory's name."""
    config = run_dir / "config.resolved.toml"
    if config.is_file():
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            tomllib = None
        if tomllib is not None:
            name = tomllib.loads(config.read_text(encoding="utf-8")).get("loss", {}).get("name")
            if isinstance(name, str):
                return name
    return run_dir.name


def load_series(run_dir: Path, label: str | None = None) -> list[Series]:
    """The run's per-step ratio series (``ratio_mean``, and ``ratio_mean_raw`` where logged), in SERIES order.

    Rows are taken in step order; a row without a step's key (an eval-only row, a step whose window missed j)
    adds nothing to that step, and non-finite values are skipped.
    """
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        raise SystemExit(f"{run_dir}: no metrics.jsonl")
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    found: dict[str, dict[int, list[float]]] = {}
    for row in sorted(rows, key=lambda r: r.get("step", 0)):
        for key, value in row.items():
            match = _STEP_KEY.match(key)
            if match and isinstance(value, (int, float)) and math.isfinite(value):
                found.setdefault(match.group(1), {}).setdefault(int(match.group(2)), []).append(float(value))
    if not found:
        raise SystemExit(f"{metrics}: no actor/ratio_mean/step_<j> metrics (a policy-gradient loss logs them)")
    name = label or run_label(run_dir)
    return [Series(f"{name}{suffix}", found[key]) for key, suffix in SERIES.items() if key in found]


def _fmt(value: float) -> str:
    return "" if math.isnan(value) else f"{value - 1:+.2e}"


def markdown_table(series: list[Series]) -> str:
    """ρ̄ − 1 per run and schedule step: the whole run and its last quarter side by side."""
    steps = sorted({j for s in series for j in s.values})
    header = "| run | " + " | ".join(f"step {j}: all | step {j}: last 1/4" for j in steps) + " |"
    rule = "|---|" + "---|---|" * len(steps)
    lines = [header, rule]
    for s in series:
        cells = [f"{_fmt(s.mean(j))} | {_fmt(s.last_quarter(j))}" for j in steps]
        lines.append(f"| {s.label} | " + " | ".join(cells) + " |")
    note = (
        "Mean of actor/ratio_mean/step_<j> − 1 over the training steps that logged step j (all, and the last "
        "quarter of them); (raw): grpo_guard's ratio before RatioNorm, on Flow-GRPO's scale."
    )
    return "\n".join([*lines, "", note]) + "\n"


def plot(series: list[Series], path: Path) -> Path:
    """ρ̄ − 1 against the schedule step, one line per series: the whole run (left) and its last quarter (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), constrained_layout=True, sharey=True)
    for ax, title, stat in ((axes[0], "whole run", Series.mean), (axes[1], "last quarter", Series.last_quarter)):
        for s in series:
            steps = sorted(s.values)
            ax.plot(steps, [stat(s, j) - 1 for j in steps], "o-", label=s.label, markersize=4)
        ax.axhline(0.0, color="grey", linewidth=0.8)
        ax.set_title(title)
        ax.set_xlabel("schedule step j")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean ratio − 1")
    axes[0].legend(loc="best", fontsize=8)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _parse_run(arg: str) -> tuple[Path, str | None]:
    path, sep, label = arg.partition("=")
    return Path(path), (label if sep else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("runs", nargs="+", help="run directories (DIR or DIR=LABEL), two or more")
    parser.add_argument("--out", type=Path, help="write the markdown table here (default: print it)")
    parser.add_argument("--png", type=Path, help="write the per-step plot here")
    args = parser.parse_args(argv)
    if len(args.runs) < 2:
        parser.error("give two or more run directories to compare")
    series = [s for arg in args.runs for s in load_series(*_parse_run(arg))]
    table = markdown_table(series)
    if args.out:
        args.out.write_text(table, encoding="utf-8")
    else:
        sys.stdout.write(table)
    if args.png:
        plot(series, args.png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
