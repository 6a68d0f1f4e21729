"""docs/examples/shapes_elbo_pg.toml and shapes_v_grpo.toml through the real loop (`omni-rl check`, `omni-rl run`
with a Ray worker), on a tiny random Qwen-Image and the JPEG reward, shrunk to 3 steps each."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from omni_rl.cli import main

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_qwen_image.tiny import build_tiny_qwen_image_pipeline

    return Path(build_tiny_qwen_image_pipeline(tmp_path_factory.mktemp("qwen") / "tiny", seed=0))


def _three_steps(example: str, out: Path, tiny_qwen: Path) -> dict[int, dict]:
    sets = {
        "run.steps": "3",
        "run.output_dir": str(out),
        "run.eval_before_training": "false",
        "model.options.path": str(tiny_qwen),
        "reward.0.name": '"jpeg_compressibility"',
        "rollout.options.group_size": "4",
        "rollout.options.batch_size": "8",
        "rollout.options.steps": "4",
        "data.prompts_per_step": "2",
        "optim.micro_batch": "4",
        "optim.mini_batch": "8",
        "loss.options.draws": "2",
        "log.image_every": "0",
    }
    args = ["run", str(EXAMPLES / example)]
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    assert main(args) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {row["step"]: row for row in rows}


@pytest.mark.parametrize("example", ["shapes_elbo_pg.toml", "shapes_v_grpo.toml"])
def test_the_example_passes_check(example: str) -> None:
    assert main(["check", str(EXAMPLES / example)]) == 0


@pytest.mark.parametrize("example", ["shapes_elbo_pg.toml", "shapes_v_grpo.toml"])
def test_three_steps_of_the_example(example: str, tiny_qwen: Path, tmp_path: Path) -> None:
    rows = _three_steps(example, tmp_path / "run", tiny_qwen)
    assert sorted(rows) == [1, 2, 3]
    for row in rows.values():
        for key in ("actor/loss", "actor/policy_loss", "actor/elbo", "reward/mean"):
            assert math.isfinite(row[key]), key
        assert row["actor/optimizer_steps"] == 1.0
    if example == "shapes_v_grpo.toml":
        # one optimizer step per training step here (mini_batch = the step's batch): on-policy, the ratio is 1
        assert all(row["actor/ratio_mean"] == 1.0 for row in rows.values())
