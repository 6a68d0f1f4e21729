"""``reward_curve.png``: the run's reward against step (wall-clock on a secondary axis), from ``metrics.jsonl``.

The main panel draws the raw train reward faint (one step's mean jumps by more than training moves it), an EMA of it
over that (the factor in the legend), and the val reward's points joined (ODE, fixed seeds: comparable across
steps). Below it, one small panel per sub-score (``shapes/count``, ...) and per reward when several are weighted or
scored at validation only, train and val alike, so a user sees *which* part of the reward moved. The top axis of
each panel reads the training wall-clock (summed step times) at that step.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from omni_rl.reporting.metrics_reader import read_metrics, series, training_clock
from omni_rl.reporting.smoothing import DEFAULT_EMA, ema

_NOT_SCORES = ("mean", "std")


def _score_names(rows: list[dict]) -> list[str]:
    """Sub-scores and reward components logged under ``reward/`` or ``val/reward/`` (``shapes/count``, ``jpeg/mean``),
    and rewards scored at validation only (``val/<name>/mean``), each once, in first-seen order."""
    names: dict[str, None] = {}
    for row in rows:
        for key in row:
            for prefix in ("val/reward/", "reward/"):
                if key.startswith(prefix) and key.removeprefix(prefix) not in _NOT_SCORES:
                    names.setdefault(key.removeprefix(prefix), None)
            parts = key.split("/")
            if len(parts) == 3 and parts[0] == "val" and parts[1] != "reward" and parts[2] == "mean":
                names.setdefault(f"eval:{parts[1]}", None)
    components = [n for n in names if n.endswith("/mean") and not n.startswith("eval:")]
    if len(components) < 2:  # one reward: its mean is the total of the main panel
        return [n for n in names if n not in components]
    return list(names)


def _wall_clock_axis(ax: Any, clock_steps: list[int], clock_s: list[float]) -> None:
    """A top axis reading seconds of training at each step (the clock is monotone, so it inverts)."""
    import numpy as np

    if len(clock_steps) < 2 or clock_s[-1] <= 0:
        return
    xs, ts = np.asarray(clock_steps, dtype=float), np.asarray(clock_s, dtype=float)
    top = ax.secondary_xaxis(
        "top",
        functions=(lambda s: np.interp(s, xs, ts), lambda t: np.interp(t, ts, xs)),  # step → s, s → step
    )
    top.set_xlabel("training wall-clock s", fontsize=7)
    top.tick_params(labelsize=7)


def _draw(ax: Any, rows: list[dict], train_key: str, val_key: str, factor: float, title: str | None) -> None:
    steps, values = series(rows, train_key)
    if values:
        ax.plot(steps, values, "-", color="tab:blue", alpha=0.25, linewidth=0.8, label="train (raw)")
        ax.plot(steps, ema(values, factor), "-", color="tab:blue", label=f"train (EMA {factor})")
    steps, values = series(rows, val_key)
    if values:
        ax.plot(steps, values, "o-", color="tab:orange", markersize=3, label="val (ODE, fixed seeds)")
    if title:
        ax.set_title(title, fontsize=8)
    ax.grid(alpha=0.3)


def plot_reward_curve(metrics_path: Path, out_path: Path, factor: float = DEFAULT_EMA) -> Path | None:
    """Write the plot (atomically); None when there is nothing to plot yet."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(metrics_path)
    if not rows:
        return None
    clock = training_clock(rows)
    clock_steps, clock_s = list(clock), list(clock.values())
    names = _score_names(rows)
    cols = min(4, max(1, len(names)))
    panel_rows = math.ceil(len(names) / cols)
    fig = plt.figure(figsize=(max(8, 2.6 * cols), 3.6 + 2.3 * panel_rows), constrained_layout=True)
    grid = fig.add_gridspec(1 + panel_rows, cols, height_ratios=[1.6] + [1] * panel_rows)
    main = fig.add_subplot(grid[0, :])
    _draw(main, rows, "reward/mean", "val/reward/mean", factor, None)
    main.set_xlabel("step")
    main.set_ylabel("reward")
    main.legend(loc="best", fontsize=8)
    _wall_clock_axis(main, clock_steps, clock_s)
    for i, name in enumerate(names):
        ax = fig.add_subplot(grid[1 + i // cols, i % cols], sharex=main)
        if name.startswith("eval:"):
            reward = name.removeprefix("eval:")
            _draw(ax, rows, f"reward/{reward}/mean", f"val/{reward}/mean", factor, f"{reward} (eval only)")
        else:
            _draw(ax, rows, f"reward/{name}", f"val/reward/{name}", factor, name)
        ax.tick_params(labelsize=7)
        _wall_clock_axis(ax, clock_steps, clock_s)
    return save_figure(fig, out_path)


def save_figure(fig: Any, out_path: Path) -> Path:
    """Write ``fig`` as PNG atomically (a reader never sees half a file) and close it."""
    import matplotlib.pyplot as plt

    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(out_path)
    return out_path
