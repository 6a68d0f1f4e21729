"""What a training step reports: its metrics row (rewards, update, advantages, rollout and timing), and the sample
grids with their captions, kept apart from the step itself so ``Trainer.train_step`` reads as rollout → score →
advantages → update and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from omni_rl.engine.rollout_correction import merge_diagnostics
from omni_rl.engine.stepping import UpdateStats, merge_stats
from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.reporting.image_grids import beside_sources
from omni_rl.reporting.metrics_logger import MetricsLogger
from omni_rl.reporting.run_summary import format_reward
from omni_rl.reporting.video_grids import save_samples, video_suffix
from omni_rl.rewards.combined import ScoredBatch
from omni_rl.train.advantages import StepAdvantages
from omni_rl.train.staleness import staleness_metrics

#: what the grids of an editing or image-to-video run show in each cell (omni_rl.reporting.image_grids.beside_sources)
SOURCES_NOTE = "; each cell: source image(s), then the result"


@attrs.frozen(kw_only=True)
class StepTimes:
    """``time.perf_counter()`` at the step's start and after its rollout, scoring and update."""

    start: float
    rollout: float
    reward: float
    end: float


def step_metrics(
    *,
    step: int,
    scored: ScoredBatch,
    advantages: StepAdvantages,
    parts: Sequence[UpdateStats],
    out: RolloutOutcome,
    sync: Mapping[str, float],
    max_staleness: int,
    times: StepTimes,
) -> dict[str, float]:
    """The step's row of metrics.jsonl (docs/training.md lists every key)."""
    update = merge_stats(parts)
    update["lr"] = float(parts[0].lr) if parts[0].lr is not None else float("nan")
    metrics = scored.metrics()
    metrics.update({f"actor/{k}": v for k, v in update.items()})
    metrics.update(merge_diagnostics([p.rollout_corr for p in parts]))
    if out.version is not None:  # rollout workers: which weights sampled this batch, and the last weight sync
        metrics.update(staleness_metrics(step, out.version, max_staleness))
        metrics.update(sync)
    metrics["advantage/abs_mean"] = float(advantages.total.abs().mean())
    metrics.update(advantages.metrics())  # advantage/<reward>/abs_mean and /std, with 2+ rewards
    if out.batch_size is not None:  # [rollout] batch_size = "auto": what it resolved to (the smallest over workers)
        metrics["rollout/batch_size"] = float(out.batch_size)
    if out.window:  # where the stochastic (trained) steps sat: MixGRPO's progressive window slides with the step
        metrics["rollout/window_start"] = float(out.window[0])
        metrics["rollout/window_size"] = float(len(out.window))
    n = len(out.prompts)
    metrics.update(
        {
            "perf/step_s": times.end - times.start,
            "perf/rollout_s": times.rollout - times.start,
            "perf/reward_s": times.reward - times.rollout,
            "perf/train_s": times.end - times.reward,
            "perf/images_per_s": n / max(times.rollout - times.start, 1e-9),
        }
    )
    return metrics


@attrs.frozen(kw_only=True)
class GridWriter:
    """Writes a step's sample grid (each image with its score and prompt, sources first for editing models) and
    hands it to the logger's image and video backends."""

    fps: int
    video_format: str

    def write(
        self,
        path: Path,
        kind: str,
        step: int,
        images: np.ndarray,
        request: RolloutRequest,
        totals: np.ndarray,
        title: str,
        logger: MetricsLogger | None,
        *,
        columns: int = 8,
        every: int = 1,
    ) -> Path:
        """``images`` and the request's prompts / conditions, taking every ``every``-th sample (a val prompt's
        first image); ``totals`` are the samples' weighted rewards."""
        prompts = list(request.prompts)[::every]
        captions = [f"{format_reward(s)} | {p}" for p, s in zip(prompts, totals[::every], strict=True)]
        conditions = request.conditions[::every]
        grid = save_samples(
            path,
            beside_sources(images[::every], conditions),
            captions,
            columns=columns,
            title=title + (SOURCES_NOTE if conditions else ""),
            fps=self.fps,
            video_format=self.video_format,
        )
        if logger is not None:
            log_grid(logger, step, kind, grid, images, self.video_format)
        return grid


def log_grid(logger: MetricsLogger, step: int, kind: str, grid: Path, images: Any, video_format: str) -> None:
    """The saved grid to the image backends (``images/<kind>``) and, for a video model's (N, F, H, W, 3) batch, the
    animated grid :func:`save_samples` wrote beside it to the video ones (``videos/<kind>``)."""
    logger.log_images(step, f"images/{kind}", grid)
    if np.ndim(images) == 5:
        logger.log_video(step, f"videos/{kind}", grid.with_suffix(video_suffix(video_format)))
