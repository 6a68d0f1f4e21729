"""docs/examples/shapes_dance_grpo.toml through the real loop (`omni-rl check` and `omni-rl run`, Ray worker, tiny
random Qwen-Image, JPEG reward), shrunk to 3 steps; DanceGRPO's per-image subset of a 4-step window with the KL term on;
and `omni-rl check` of the preset with the other windowed samplers (flow_sde, cps) and a KL term."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

from omni_rl.cli import main

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_dance_grpo.toml"


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random pipeline of the example's model family (qwen_image), so that only the weights differ from it."""
    from omni_rl_qwen_image.tiny import build_tiny_qwen_image_pipeline

    return Path(build_tiny_qwen_image_pipeline(tmp_path_factory.mktemp("qwen") / "tiny", seed=0))


def _sets(**changes: str) -> list[str]:
    args = []
    for key, value in changes.items():
        args += ["--set", f"{key.replace('__', '.')}={value}"]
    return args


def _run(out: Path, tiny_qwen: Path, steps: int, *extra: str) -> dict[int, dict]:
    args = ["run", str(EXAMPLE)]
    args += _sets(
        run__steps=str(steps),
        run__output_dir=str(out),
        run__eval_before_training="false",
        model__options__path=str(tiny_qwen),
        reward__0__name='"jpeg_compressibility"',
        rollout__options__height="32",
        rollout__options__width="32",
        rollout__options__group_size="4",
        rollout__options__batch_size="8",
        data__prompts_per_step="2",
        optim__micro_batch="8",
        optim__mini_batch="8",
        log__image_every="0",
    )
    for value in extra:
        args += ["--set", value]
    assert main(args) == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {row["step"]: row for row in rows}


def test_the_example_passes_check() -> None:
    assert main(["check", str(EXAMPLE)]) == 0


def test_three_steps_of_the_example(tiny_qwen: Path, tmp_path: Path) -> None:
    rows = _run(tmp_path / "run", tiny_qwen, 3)
    assert sorted(rows) == [1, 2, 3]
    for row in rows.values():
        assert (row["rollout/window_start"], row["rollout/window_size"]) == (0.0, 2.0)
        for key in ("actor/loss", "actor/policy_loss", "actor/ratio_mean", "reward/mean", "advantage/abs_mean"):
            assert math.isfinite(row[key]), key
        assert abs(row["actor/ratio_mean"] - 1) < 1e-2
        assert row["actor/optimizer_steps"] == 1.0
        steps = {int(k.rsplit("_", 1)[1]) for k in row if k.startswith("actor/ratio_mean/step_")}
        assert steps == {0, 1}  # every image trains both window steps
    assert (tmp_path / "run" / "checkpoints" / "step_3" / "pytorch_lora_weights.safetensors").exists()
    resolved = (tmp_path / "run" / "config.resolved.toml").read_text()
    assert 'name = "dance_grpo"' in resolved and 'name = "dance_sde"' in resolved
    assert "noise_level = 4.0" in resolved and "shared_initial_noise = true" in resolved


SUBSET = [
    "sampler.options.window_range=[0,4]",
    "sampler.options.window_size=4",
    "sampler.options.timestep_fraction=0.5",
]


def test_two_steps_of_a_trained_subset_with_the_kl_term(tiny_qwen: Path, tmp_path: Path) -> None:
    """DanceGRPO's own trained subset: each image trains 2 of a 4-step window, its own ones."""
    rows = _run(tmp_path / "kl", tiny_qwen, 2, "loss.options.kl_coef=0.04", *SUBSET)
    for row in rows.values():
        assert (row["rollout/window_start"], row["rollout/window_size"]) == (0.0, 4.0)  # the whole recorded window
        steps = {int(k.rsplit("_", 1)[1]) for k in row if k.startswith("actor/ratio_mean/step_")}
        assert len(steps) >= 2 and steps <= {0, 1, 2, 3}  # each image trains 2 distinct steps of the 4
        assert math.isfinite(row["actor/kl"]) and row["actor/kl"] >= 0
        assert math.isfinite(row["actor/loss"])


@pytest.mark.parametrize(
    "sampler",
    [
        ["sampler.name=dance_sde"],
        ["sampler.name=flow_sde", "sampler.options.noise_level=0.7", "sampler.options.timestep_fraction=0.6"],
        ["sampler.name=cps", "sampler.options.noise_level=0.8", "sampler.options.timestep_fraction=0.6"],
    ],
    ids=["dance_sde", "flow_sde", "cps"],
)
def test_the_preset_checks_with_each_windowed_sampler_and_a_kl_term(sampler: list[str], tmp_path: Path) -> None:
    """The preset's whole-schedule window (every step but the last) with a KL term: cps's std is 0 only on the
    last step, which that window leaves out, so the check passes for all three; timestep_fraction is a window
    option of each of them."""
    config = tmp_path / "preset.toml"
    config.write_text(
        '[algorithm]\nname = "dance_grpo"\n\n[model]\nname = "sd3"\n'
        'options = { path = "unused/by/check", build_tiny_if_missing = true }\n\n'
        '[[reward]]\nname = "jpeg_compressibility"\n\n[data]\ntrain = "package:omni_rl_shapes:prompts/train.txt"\n'
    )
    args = ["check", str(config), "--set", "loss.options.kl_coef=0.04"]
    for value in sampler:
        args += ["--set", value]
    assert main(args) == 0
