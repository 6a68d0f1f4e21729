"""docs/examples/quickstart.toml (the README's main job), shrunk with --set, through the real loop (`omni-rl
check`, then `omni-rl run`: Ray, the shipped Qwen-Image shapes model by its package path, true CFG in rollout and
update): the example's base val reward is the shipped model's, the on-policy ratio is 1 and the LoRA moves. The
full run's gains are measured in docs/benchmarks.md (`nox -s convergence`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import shapes_runs

from omni_rl.cli import main
from omni_rl.testing.ray import local_ray
from omni_rl.testing.runs import run_config

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "quickstart.toml"

SHRINK = (*shapes_runs.SHRINK, "cluster.cpus_per_worker=1")


def test_the_example_passes_check() -> None:
    pytest.importorskip("omni_rl_qwen_image")
    assert main(["check", str(EXAMPLE)]) == 0


@pytest.mark.slow  # over 45 s in the default suite; `nox -s integration` / `pytest -m slow` run it
def test_two_steps_of_the_example(tmp_path: Path) -> None:
    pytest.importorskip("omni_rl_qwen_image")
    with local_ray():
        rows = run_config(EXAMPLE, tmp_path / "run", SHRINK)
    assert [row["step"] for row in rows] == [0, 1, 2]
    base = rows[0]["val/reward/mean"]
    assert 0.1 <= base <= 0.7  # the shipped model draws shapes (48 val images: noisy around its recorded 0.345)
    for row in rows[1:]:
        assert abs(row["actor/ratio_mean"] - 1) < 1e-3  # one optimizer step per batch: on-policy
        assert row["actor/grad_norm"] > 0
    assert 0.0 <= rows[-1]["val/reward/mean"] <= 1.0
