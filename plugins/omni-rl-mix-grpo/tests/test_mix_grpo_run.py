"""docs/examples/shapes_mix_grpo.toml through the real loop (`omni-rl check` and `omni-rl run`, Ray worker, tiny
random Qwen-Image, JPEG reward), shrunk to 3 steps; and a resumed run's progressive window equals the uninterrupted
one's.

The window slides one step per training step here (``iters_per_group = 1`` over [0, 6) of the 8 rollout steps), so
``rollout/window_start`` is 0, 1, 2, ... and a resume that lost count of the step would log other starts.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path

import pytest

from omni_rl.cli import main

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_mix_grpo.toml"


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random pipeline of the example's model family (qwen_image), so that only the weights differ from it."""
    from omni_rl_qwen_image.tiny import build_tiny_qwen_image_pipeline

    return Path(build_tiny_qwen_image_pipeline(tmp_path_factory.mktemp("qwen") / "tiny", seed=0))


def _run(out: Path, tiny_qwen: Path, steps: int, *extra: str) -> None:
    sets = {
        "run.steps": str(steps),
        "run.output_dir": str(out),
        "run.eval_before_training": "false",
        "model.options.path": str(tiny_qwen),
        "reward.0.name": '"jpeg_compressibility"',
        "rollout.options.height": "32",
        "rollout.options.width": "32",
        "rollout.options.group_size": "4",
        "rollout.options.batch_size": "8",
        "data.prompts_per_step": "2",
        "optim.micro_batch": "8",
        "optim.mini_batch": "8",
        "sampler.options.window_range": "[0, 6]",
        "sampler.options.iters_per_group": "1",
        "log.image_every": "0",
        # the example's cosine decays over run.steps, so a 3-step and a 5-step run would train step 2 at different
        # learning rates: the resume check compares the two, so it needs a schedule that does not depend on the length
        "optim.lr_schedule": '"constant"',
    }
    args = ["run", str(EXAMPLE)]
    for key, value in sets.items():
        args += ["--set", f"{key}={value}"]
    for value in extra:
        args += ["--set", value]
    assert main(args) == 0


def _rows(run_dir: Path) -> dict[int, dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {row["step"]: row for row in rows}


@pytest.fixture(scope="module")
def three_steps(tiny_qwen: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mix") / "run"
    _run(out, tiny_qwen, 3)
    return out


def test_the_example_passes_check() -> None:
    assert main(["check", str(EXAMPLE)]) == 0


def test_three_steps_of_the_example(three_steps: Path) -> None:
    rows = _rows(three_steps)
    assert sorted(rows) == [1, 2, 3]
    assert [rows[t]["rollout/window_start"] for t in (1, 2, 3)] == [0.0, 1.0, 2.0]
    assert {rows[t]["rollout/window_size"] for t in (1, 2, 3)} == {2.0}
    for row in rows.values():
        for key in ("actor/loss", "actor/policy_loss", "actor/ratio_mean", "reward/mean"):
            assert math.isfinite(row[key]), key
        assert abs(row["actor/ratio_mean"] - 1) < 1e-2
        assert row["actor/optimizer_steps"] == 1.0
    assert (three_steps / "checkpoints" / "step_3" / "pytorch_lora_weights.safetensors").exists()
    resolved = (three_steps / "config.resolved.toml").read_text()
    assert 'name = "mix_grpo"' in resolved and 'ode_solver = "dpm_solver_2m"' in resolved


def test_a_resumed_run_slides_its_window_as_the_uninterrupted_run(
    three_steps: Path, tiny_qwen: Path, tmp_path: Path
) -> None:
    """Uninterrupted: 5 steps. Interrupted: the 3-step run (checkpoint at step 3), resumed to step 5."""
    straight = tmp_path / "straight"
    _run(straight, tiny_qwen, 5)
    resumed = tmp_path / "resumed"
    shutil.copytree(three_steps, resumed)
    _run(resumed, tiny_qwen, 5, 'run.resume="auto"')
    expected, got = _rows(straight), _rows(resumed)
    assert sorted(got) == sorted(expected) == [1, 2, 3, 4, 5]
    assert [got[t]["rollout/window_start"] for t in range(1, 6)] == [0.0, 1.0, 2.0, 3.0, 4.0]
    for t in range(1, 6):
        for key in ("rollout/window_start", "rollout/window_size", "reward/mean"):
            assert got[t][key] == expected[t][key], (t, key)
