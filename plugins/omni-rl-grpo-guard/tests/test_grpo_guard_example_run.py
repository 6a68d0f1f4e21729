"""docs/examples/shapes_grpo_guard.toml, shrunk with --set, for 3 steps through the real loop (Ray, the shipped
shapes model, the diffusers rollout): exit 0, and the loss's metrics logged, the per-timestep ones for both window
steps, with two optimizer steps per training step as the example takes."""

from __future__ import annotations

import os
from pathlib import Path

from omni_rl.testing.runs import run_config

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_grpo_guard.toml"

SHRINK = (
    "run.steps=3",
    "run.eval_before_training=false",
    "run.eval_every=0",
    "run.save_every=0",
    "log.image_every=0",
    'log.backends=["jsonl"]',
    "data.prompts_per_step=2",
    "rollout.options.group_size=4",
    "rollout.options.batch_size=8",
    "optim.micro_batch=4",
    "optim.mini_batch=4",
)


def test_three_steps_of_the_example(tmp_path: Path) -> None:
    rows = run_config(EXAMPLE, tmp_path / "run", SHRINK)
    assert [row["step"] for row in rows] == [1, 2, 3]
    keys = ["policy_loss", "ratio_mean", "ratio_std", "ratio_mean_raw", "ratio_std_raw", "ratio_bias", "ppo_kl"]
    keys += ["clip_frac", "clip_frac_high", "clip_frac_low"]
    keys += [f"{name}/step_{j}" for name in ("ratio_mean", "ratio_mean_raw") for j in (0, 1)]
    for row in rows:
        for key in keys:
            value = row[f"actor/{key}"]
            assert value == value and abs(value) != float("inf"), key
        assert row["actor/optimizer_steps"] == 2.0
        assert abs(row["actor/ratio_mean"] - 1) < 1e-3
