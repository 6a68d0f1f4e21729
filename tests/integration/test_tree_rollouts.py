"""Tree rollouts (docs/math.md#tree-rollouts) with rollout workers apart from the policy worker: the small sd3 JPEG
run with a [2, 2] tree gives the same rewards and update as the colocated run (the tree's noise is keyed by run
seed, step, group and node, so whichever worker samples it draws the same tree)."""

from __future__ import annotations

from pathlib import Path

import pytest

TREE = (
    "sampler.options.window_size=2",
    "sampler.options.window_range=[0, 3]",
    'sampler.options.window_mode="fixed"',
    "sampler.options.tree_branching=[2, 2]",
    "loss.options.tree_branching=[2, 2]",
)


def test_a_tree_run_with_rollout_workers_reproduces_the_colocated_one(tmp_path: Path, small_jpeg_run) -> None:
    colocated = small_jpeg_run(tmp_path / "colocated", 1, *TREE)
    apart = small_jpeg_run(tmp_path / "apart", 1, *TREE, "cluster.rollout_workers=1")
    assert len(colocated) == len(apart) == 2
    for step, (a, b) in enumerate(zip(colocated, apart, strict=True), start=1):
        assert a["reward/mean"] == b["reward/mean"] and a["reward/std"] == b["reward/std"], step
        for key in ("actor/loss", "actor/grad_norm", "actor/ratio_mean"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-9), (step, key)
        assert b["rollout/version"] == step - 1
