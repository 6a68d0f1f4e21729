"""The OPD example: ``omni-rl check`` and three shrunk steps on the tiny SD3 through the real loop. Before the first
optimizer step the student is the teacher; with teacher_substeps > 1 the loss is still positive (the teacher
integrates more finely), and it falls as the student learns."""

from __future__ import annotations

import json
from pathlib import Path

from omni_rl.cli import main

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_opd.toml"


def test_the_opd_example_checks_and_runs(tmp_path: Path, tiny_sd3_path: Path, ray_cluster: None) -> None:
    assert main(["check", str(EXAMPLE)]) == 0
    out = tmp_path / "opd"
    overrides = {
        "run.steps": "3",
        "run.output_dir": str(out),
        "run.eval_every": "0",
        "run.eval_before_training": "false",
        "model.name": '"sd3"',
        "model.options.path": str(tiny_sd3_path),
        "reward.0.name": '"jpeg_compressibility"',
        "rollout.options.steps": "2",
        "loss.options.steps": "2",
        "data.prompts_per_step": "2",
        "optim.lr": "1e-2",
        "log.image_every": "0",
    }
    args = ["run", str(EXAMPLE)]
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    assert main(args) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert rows[0]["actor/kl"] > 0 and rows[0]["actor/velocity_mse"] > 0
