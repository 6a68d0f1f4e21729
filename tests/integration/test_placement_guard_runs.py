"""Whole runs under the placement guard (OMNI_RL_PLACEMENT_GUARD=1): on a CPU machine, any op that mixes a
record left on the host with tensors on the worker's device fails, as it fails on the first GPU step.

Issue 28's failure (the rollout's log-probs on the host against the recomputed ones on the device, in the rollout
correction) is the first case: a recompute with decoupled correction. The others cover the other update engine
(a forward-process loss), the disaggregated rollout (batches arriving from another process) and the Qwen-Image
model of the Quickstart."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_rl.engine import placement_guard

EXAMPLES = Path(__file__).parents[2] / "docs" / "examples"


@pytest.fixture
def guard(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(placement_guard.ENV, "1")


CASES = {
    # issue 28's failure: the recompute against the rollout's log-probs in the rollout correction (bf16 rollout)
    "decoupled_correction_bf16_rollout": [
        "rollout_correction.mode=decoupled",
        "rollout_correction.rejection=step_k1",
        "rollout.options.dtype=bfloat16",
    ],
    "rollout_worker_stale": ["cluster.rollout_workers=1", "run.max_staleness=1"],
    "diffusion_nft": ["algorithm.name=diffusion_nft", "loss.name=diffusion_nft", "loss.options={}"],
}


#: the issue-28 case runs by default; the other engines' and the disaggregated rollout's guarded runs are `slow`
#: (`nox -s integration` runs them) to keep the default suite's time
SLOW = {"rollout_worker_stale", "diffusion_nft"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW else c for c in sorted(CASES)])
def test_guarded_run(case: str, tmp_path: Path, small_jpeg_args, ray_cluster: None, guard: None) -> None:
    from omni_rl.cli import main
    from omni_rl.reporting.metrics_reader import read_metrics

    out = tmp_path / case
    assert main(small_jpeg_args(out, *CASES[case])) == 0
    rows = read_metrics(out / "metrics.jsonl")
    assert len(rows) == 2
