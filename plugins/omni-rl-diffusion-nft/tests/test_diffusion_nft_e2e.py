"""End to end: `omni-rl run` on the shapes_diffusion_nft example through the real loop (Ray worker, tiny SD3,
old-adapter rollouts, forward update, refresh), shrunk to 2 steps of 2 prompts × 2 images at 32 px."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_diffusion_nft.toml"
NFT_METRICS = ("policy_loss", "positive_loss", "negative_loss", "old_deviation", "reward_prob_mean", "timestep_mean")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    from omni_rl.cli import main

    tmp = tmp_path_factory.mktemp("nft-e2e")
    tiny = build_tiny_sd3_pipeline(tmp / "tiny", seed=0)
    out = tmp / "run"
    overrides = {
        "run.steps": "2",
        "run.output_dir": str(out),
        "run.eval_every": "2",
        "model.name": '"sd3"',  # the example's model is the Qwen-Image shapes one
        "model.options.path": str(tiny),
        "reward.0.name": '"jpeg_compressibility"',
        "rollout.options.height": "32",
        "rollout.options.width": "32",
        "rollout.options.group_size": "2",
        "rollout.options.steps": "2",
        "rollout.options.eval_steps": "2",
        "data.prompts_per_step": "2",
        "data.val_prompts": "2",
        "loss.options.num_steps": "2",
        "loss.options.timesteps": "2",
        "loss.options.kl_coef": "1e-4",  # the example turns the KL off: run the reference view here
        "log.image_every": "0",
    }
    args = ["run", str(EXAMPLE)]
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    assert main(args) == 0
    return out


def test_the_run_logs_the_loss_metrics(run_dir: Path) -> None:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [row for row in rows if row.get("step", 0) >= 1 and "actor/loss" in row]
    assert [row["step"] for row in steps] == [1, 2]
    for row in steps:
        for name in (*NFT_METRICS, "kl", "old_kl", "loss", "grad_norm"):
            value = row[f"actor/{name}"]
            assert math.isfinite(value), name
        assert row["actor/optimizer_steps"] == 1.0
        assert 0.0 <= row["actor/reward_prob_mean"] <= 1.0
        assert 0.0 < row["actor/timestep_mean"] <= 1.0
    assert any("val/reward/mean" in row for row in rows)


def test_the_run_writes_its_checkpoint_and_resolved_config(run_dir: Path) -> None:
    assert (run_dir / "checkpoints" / "step_2" / "pytorch_lora_weights.safetensors").is_file()
    resolved = (run_dir / "config.resolved.toml").read_text()
    assert 'name = "diffusion_nft"' in resolved
    assert "omni-rl-diffusion-nft==" in (run_dir / "plugins.txt").read_text()
