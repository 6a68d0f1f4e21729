"""Streaming rewards (``[run] stream_rewards``): a reward actor scores each worker's part of a training batch as
soon as it is sampled, and the run logs exactly what whole-batch scoring logs. End to end on the tiny SD3 pipeline,
the JPEG reward in an actor of half a CPU and the session's Ray (2 CPUs)."""

from __future__ import annotations

from pathlib import Path

#: the JPEG reward in its own actor, and workers of half a CPU so that two fit beside it; one step (its row holds
#: the scores and the update that used them)
ACTOR = ("reward.0.resources={CPU = 0.5}", "cluster.cpus_per_worker=0.5", "run.save_every=0", "run.steps=1")


def _scores_and_update(row: dict) -> dict:
    """Every logged value but the timings (perf/*), which differ between any two runs."""
    return {k: v for k, v in row.items() if not k.startswith("perf/")}


def test_streamed_scores_equal_whole_batch_scores(tmp_path: Path, small_jpeg_run, parts_submitted: list[int]) -> None:
    """Two policy workers sample a half each: streamed, the actor scores each half as it is ready; the metrics
    (rewards, their sub-scores, advantages, the update) equal whole-batch scoring's bit for bit. (One-step-off
    streaming, the next batch scored while this one trains: test_rollout_workers.py.)"""
    whole = small_jpeg_run(tmp_path / "whole", 2, *ACTOR, "run.stream_rewards=false")
    assert parts_submitted == []
    streamed = small_jpeg_run(tmp_path / "streamed", 2, *ACTOR)
    assert parts_submitted == [2]  # the step's two halves, handed over as they started sampling
    assert len(whole) == len(streamed) == 1
    for a, b in zip(whole, streamed, strict=True):
        assert _scores_and_update(a) == _scores_and_update(b)
    assert "reward/jpeg_compressibility/size_kb" in streamed[0]
