"""``omni-rl compare``: several runs' reward curves on one figure, labelled by how their configs differ.

A user who tries two algorithms or two seeds wants the difference, not two folders of PNGs: the val reward of each
run (points joined) and its smoothed train reward (dashed), against step and against training wall-clock, with each
run labelled by the config values that set it apart (``algorithm.name=dance_grpo``, ``run.seed=1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omni_rl.reporting.reward_curve import save_figure
from omni_rl.reporting.run_summary import RunSummary
from omni_rl.reporting.smoothing import DEFAULT_EMA, ema

#: keys that differ between any two runs and say nothing about the experiment
_IGNORED = ("run.output_dir", "run.resume", "log.", "cluster.address")
_MAX_LABEL = 60


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``; arrays of tables (``[[reward]]``) get their index: ``reward.0.name``."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{path}."))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value):
                out.update(flatten(item, f"{path}.{i}."))
        else:
            out[path] = value
    return out


def difference_labels(configs: list[Mapping[str, Any]], fallback: list[str]) -> list[str]:
    """Per run, ``key=value`` for every key whose value is not the same in all runs; ``fallback`` (the directory
    names) when the configs do not differ or the label would be too long to read."""
    flat = [flatten(c) for c in configs]
    keys = sorted({k for f in flat for k in f})
    differing = [
        k
        for k in keys
        if not k.startswith(_IGNORED) and len({repr(f.get(k)) for f in flat}) > 1 and not k.startswith("run.output")
    ]
    labels = []
    for f, name in zip(flat, fallback, strict=True):
        label = ", ".join(f"{k}={f.get(k, '—')}" for k in differing)
        labels.append(label if label and len(label) <= _MAX_LABEL else name)
    if len(set(labels)) < len(labels):  # two runs with the same differing values (or too long): say which is which
        labels = [f"{name}: {label}" if label != name else name for label, name in zip(labels, fallback, strict=True)]
    return labels


def plot_comparison(summaries: list[RunSummary], out_path: Path, factor: float = DEFAULT_EMA) -> Path:
    """Write the overlay (atomically): val reward joined and the train reward's EMA, by step and by wall-clock."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, summary in enumerate(summaries):
        color = colors[i % len(colors)]
        if summary.val_curve:
            steps, values = zip(*summary.val_curve, strict=True)
            times = [summary.clock.get(s, 0.0) for s in steps]
            axes[0].plot(steps, values, "o-", color=color, markersize=3, label=f"{summary.label} (val)")
            axes[1].plot(times, values, "o-", color=color, markersize=3, label=f"{summary.label} (val)")
        if summary.train_curve:
            steps, values = zip(*summary.train_curve, strict=True)
            smooth = ema(values, factor)
            times = [summary.clock.get(s, 0.0) for s in steps]
            label = f"{summary.label} (train, EMA {factor})"
            axes[0].plot(steps, smooth, "--", color=color, alpha=0.7, label=label)
            axes[1].plot(times, smooth, "--", color=color, alpha=0.7, label=label)
    axes[0].set_xlabel("step")
    axes[1].set_xlabel("training wall-clock seconds")
    for ax in axes:
        ax.set_ylabel("reward")
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", fontsize=7)
    return save_figure(fig, out_path)
