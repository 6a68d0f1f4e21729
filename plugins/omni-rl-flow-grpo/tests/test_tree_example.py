"""docs/examples/shapes_tree_grpo.toml through the real loop (`omni-rl check`, `omni-rl run` with a Ray worker), on a
tiny random Qwen-Image and the JPEG reward, shrunk to 3 steps with a [2, 2] tree; and a resumed tree run repeats the
uninterrupted one."""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from omni_rl.cli import main

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_tree_grpo.toml"


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_qwen_image.tiny import build_tiny_qwen_image_pipeline

    return Path(build_tiny_qwen_image_pipeline(tmp_path_factory.mktemp("qwen") / "tiny", seed=0))


def _run(out: Path, tiny_qwen: Path, steps: int, *extra: str) -> dict[int, dict]:
    sets = {
        "run.steps": str(steps),
        "run.output_dir": str(out),
        "run.eval_before_training": "false",
        "run.save_every": "1",
        "model.options.path": str(tiny_qwen),
        "reward.0.name": '"jpeg_compressibility"',
        "rollout.options.group_size": "4",
        "rollout.options.batch_size": "8",
        "rollout.options.steps": "4",
        "sampler.options.tree_branching": "[2, 2]",
        "loss.options.tree_branching": "[2, 2]",
        "data.prompts_per_step": "2",
        "optim.micro_batch": "8",
        "optim.mini_batch": "8",
        "optim.lr_schedule": '"constant"',
        "log.image_every": "0",
    }
    args = ["run", str(EXAMPLE)]
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    for value in extra:
        args += ["--set", value]
    assert main(args) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {row["step"]: row for row in rows}


@pytest.fixture(scope="module")
def three_steps(tiny_qwen: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tree") / "run"
    _run(out, tiny_qwen, 3)
    return out


def test_the_example_passes_check() -> None:
    assert main(["check", str(EXAMPLE)]) == 0


def test_three_steps_of_the_example(three_steps: Path) -> None:
    lines = (three_steps / "metrics.jsonl").read_text().splitlines()
    rows = {json.loads(line)["step"]: json.loads(line) for line in lines}
    assert sorted(rows) == [1, 2, 3]
    for row in rows.values():
        for key in ("actor/loss", "actor/policy_loss", "actor/ratio_mean", "reward/mean"):
            assert math.isfinite(row[key]), key
        assert abs(row["actor/ratio_mean"] - 1) < 1e-2
    resolved = (three_steps / "config.resolved.toml").read_text()
    assert resolved.count("tree_branching = [\n    2,\n    2,\n]") == 2  # the sampler's and the loss's


def test_a_resumed_tree_run_repeats_the_uninterrupted_one(three_steps: Path, tiny_qwen: Path, tmp_path: Path) -> None:
    straight = _run(tmp_path / "straight", tiny_qwen, 4)
    resumed_dir = tmp_path / "resumed"
    shutil.copytree(three_steps, resumed_dir)
    resumed = _run(resumed_dir, tiny_qwen, 4, 'run.resume="auto"')
    assert sorted(resumed) == [1, 2, 3, 4]
    for key in ("reward/mean", "reward/std"):
        assert resumed[4][key] == straight[4][key], key
    assert resumed[4]["actor/loss"] == pytest.approx(straight[4]["actor/loss"], rel=1e-5, abs=1e-9)
