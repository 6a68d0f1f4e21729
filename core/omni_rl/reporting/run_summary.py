"""What a finished (or running) run directory says at a glance: the val reward at its base, best and last
evaluation, each reward sub-score, the training time and throughput, and where the curve, the grids, the last
checkpoint are, with the command that exports it.

Read from the files the run wrote (``metrics.jsonl``, ``config.resolved.toml``, ``checkpoints/``), never from the
trainer's memory, so the end-of-run console table and ``omni-rl compare`` print exactly the same numbers.
"""

from __future__ import annotations

import math
import re
import shlex
from pathlib import Path
from typing import Any

import attrs
import tomllib
from rich import box
from rich.table import Table

from omni_rl.errors import ConfigError
from omni_rl.reporting.metrics_reader import is_finite_number, read_metrics, series, training_clock

#: digits of every reward shown (grid captions, the console summary, ``omni-rl compare``): one format everywhere
REWARD_FORMAT = "{:.3f}"

_VAL_PREFIX = "val/reward/"
_STEP_DIR = re.compile(r"^step_(\d+)$")


def format_reward(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else REWARD_FORMAT.format(value)


@attrs.frozen(kw_only=True)
class ScoreSummary:
    """One val series (the total or a sub-score): at the first evaluation, its best after it, and the last."""

    base: float | None
    best: float | None
    best_step: int | None
    final: float | None


@attrs.frozen(kw_only=True)
class RunSummary:
    run_dir: Path
    label: str
    steps: int
    total: ScoreSummary
    #: sub-scores and reward components by metric name (``shapes/count``, ``pickscore/mean``, ...)
    sub_scores: dict[str, ScoreSummary]
    train_s: float
    images_per_s: float | None
    curve: Path | None
    last_grid: Path | None
    last_checkpoint: Path | None
    #: the training curve, for overlays: (step, train reward) and (step, val reward) pairs, wall-clock per step
    train_curve: list[tuple[int, float]]
    val_curve: list[tuple[int, float]]
    clock: dict[int, float]

    @property
    def export_command(self) -> str | None:
        if self.last_checkpoint is None:
            return None
        step = _STEP_DIR.match(self.last_checkpoint.name)
        step_arg = f" --step {step.group(1)}" if step else ""
        run = shlex.quote(str(self.run_dir))
        return f"omni-rl export {run}{step_arg} --out {shlex.quote(str(self.run_dir / 'export'))}"


def is_run_dir(path: Path) -> bool:
    return (path / "metrics.jsonl").is_file() and (path / "config.resolved.toml").is_file()


def read_config(run_dir: Path) -> dict[str, Any]:
    return tomllib.loads((run_dir / "config.resolved.toml").read_text(encoding="utf-8"))


def score_summary(rows: list[dict[str, Any]], key: str) -> ScoreSummary:
    """Base (first evaluation), best after it (and its step), and final value of ``key``."""
    points = [(r["step"], float(r[key])) for r in rows if is_finite_number(r.get(key))]
    if not points:
        return ScoreSummary(base=None, best=None, best_step=None, final=None)
    best_step, best = max(points[1:] or points, key=lambda p: p[1])
    return ScoreSummary(base=points[0][1], best=best, best_step=best_step, final=points[-1][1])


def _newest(paths: list[Path]) -> Path | None:
    def step(p: Path) -> int:
        found = re.search(r"(\d+)", p.stem)
        return int(found.group(1)) if found else -1

    return max(paths, key=step) if paths else None


def summarize_run(run_dir: Path) -> RunSummary:
    """The summary of ``run_dir``, labelled by its name; a directory that is not a run is a ConfigError (exit 2)."""
    run_dir = Path(run_dir)
    if not is_run_dir(run_dir):
        raise ConfigError(
            f"{str(run_dir)!r} is not an omni-rl run directory (no metrics.jsonl and config.resolved.toml in it)",
            hint="pass the [run] output_dir of a training run, e.g. runs/quickstart",
        )
    rows = read_metrics(run_dir / "metrics.jsonl")
    clock = training_clock(rows)
    not_scores = (f"{_VAL_PREFIX}mean", f"{_VAL_PREFIX}std")
    sub_keys = sorted({k for r in rows for k in r if k.startswith(_VAL_PREFIX) and k not in not_scores})
    throughput = [float(r["perf/images_per_s"]) for r in rows if is_finite_number(r.get("perf/images_per_s"))]
    checkpoints = [p for p in (run_dir / "checkpoints").glob("step_*") if p.is_dir() and _STEP_DIR.match(p.name)]
    curve = run_dir / "reward_curve.png"
    return RunSummary(
        run_dir=run_dir,
        label=run_dir.name,
        steps=max((r["step"] for r in rows), default=0),
        total=score_summary(rows, f"{_VAL_PREFIX}mean"),
        sub_scores={k.removeprefix(_VAL_PREFIX): score_summary(rows, k) for k in sub_keys},
        train_s=clock[max(clock)],
        images_per_s=sum(throughput) / len(throughput) if throughput else None,
        curve=curve if curve.is_file() else None,
        last_grid=_newest(list(run_dir.glob("val_step_*.png")) or list(run_dir.glob("samples_step_*.png"))),
        last_checkpoint=_newest(checkpoints),
        train_curve=list(zip(*series(rows, "reward/mean"), strict=True)),
        val_curve=list(zip(*series(rows, f"{_VAL_PREFIX}mean"), strict=True)),
        clock=clock,
    )


def _best(score: ScoreSummary) -> str:
    return f"{format_reward(score.best)} ({score.best_step})" if score.best is not None else "—"


def summary_table(summaries: list[RunSummary]) -> Table:
    """One row per run and score: base, best (step), final val reward, then time and throughput."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="val reward (ODE, fixed seeds)")
    for column in ("run", "score", "base", "best (step)", "final", "steps", "train s", "images/s"):
        table.add_column(column, overflow="fold", justify="left" if column in ("run", "score") else "right")
    for summary in summaries:
        ips = f"{summary.images_per_s:.2f}" if summary.images_per_s is not None else "—"
        scores = [("total", summary.total), *summary.sub_scores.items()]
        for i, (name, score) in enumerate(scores):
            first = i == 0
            table.add_row(
                summary.label if first else "",
                name,
                format_reward(score.base),
                _best(score),
                format_reward(score.final),
                str(summary.steps) if first else "",
                f"{summary.train_s:.0f}" if first else "",
                ips if first else "",
            )
    return table


def summary_paths(summary: RunSummary) -> list[tuple[str, str]]:
    """Where to look next: the curve, the last grid, the last checkpoint and how to export it."""
    out = []
    for name, path in (
        ("reward curve", summary.curve),
        ("last grid", summary.last_grid),
        ("last checkpoint", summary.last_checkpoint),
    ):
        if path is not None:
            out.append((name, str(path)))
    if summary.export_command:
        out.append(("export", summary.export_command))
    return out
