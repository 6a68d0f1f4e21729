"""The online-SFT (RAFT) example: ``omni-rl check`` and three shrunk steps on the tiny SD3 through the real loop."""

from __future__ import annotations

import json
from pathlib import Path

from omni_rl.cli import main

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_online_sft.toml"


def test_the_online_sft_example_checks_and_runs(tmp_path: Path, tiny_sd3_path: Path, ray_cluster: None) -> None:
    assert main(["check", str(EXAMPLE)]) == 0
    out = tmp_path / "sft"
    overrides = {
        "run.steps": "3",
        "run.output_dir": str(out),
        "run.eval_every": "0",
        "run.eval_before_training": "false",
        "model.name": '"sd3"',
        "model.options.path": str(tiny_sd3_path),
        "reward.0.name": '"jpeg_compressibility"',
        "rollout.options.group_size": "3",
        "rollout.options.steps": "3",
        "data.prompts_per_step": "2",
        "loss.options.min_reward_spread": "0.0",
        "log.image_every": "0",
    }
    args = ["run", str(EXAMPLE)]
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    assert main(args) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert all(row["actor/selected"] == 2.0 and row["actor/sft_mse"] > 0 for row in rows)
