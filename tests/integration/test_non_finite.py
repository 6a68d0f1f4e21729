"""A non-finite loss or gradient skips the optimizer step and is counted; K such steps in a row stop the run,
with the last good checkpoint intact."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from omni_rl import build, load_config
from omni_rl.batch import LossOutput
from omni_rl.cli import main
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.stepping import merge_stats
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import RolloutRequest
from omni_rl.rundir import checkpoint
from omni_rl.train.trainer import Trainer

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"


class NaNLoss:
    """flow_grpo's loss times NaN: what a diverged run produces."""

    def __init__(self) -> None:
        self.inner = build("loss", "flow_grpo", {})
        self.requirements = self.inner.requirements

    def prepare(self, rewards, advantages, group_ids):
        return {}

    def __call__(self, inputs) -> LossOutput:
        out = self.inner(inputs)
        return LossOutput(loss=out.loss * float("nan"), metrics=out.metrics)


def test_non_finite_gradients_skip_the_optimizer_step(tiny_sd3: Path) -> None:
    model = build("model", "sd3", {"path": str(tiny_sd3), "lora_rank": 4})
    sampler = build("sampler", "flow_sde", {"window_size": 1, "window_range": [0, 2]})
    backend = build("rollout", "diffusers", {"group_size": 2, "steps": 2, "height": 32, "width": 32, "cfg": 1.0})
    request = RolloutRequest(prompts=["a", "a", "b", "b"], group_ids=[0, 0, 1, 1], seeds=[1, 2, 3, 4], step=1)
    batch = backend.generate(model, sampler, request)
    params = model.trainable_parameters()
    before = [p.detach().clone() for p in params]
    optimizer = torch.optim.AdamW(params, lr=1e-2)
    engine = TrajectoryUpdate(model, sampler, NaNLoss(), optimizer, OptimConfig(micro_batch=2, mini_batch=2))
    stats = engine.run(batch, torch.tensor([1.0, -1.0, 1.0, -1.0]), {}, generator=torch.Generator().manual_seed(0))
    metrics = merge_stats([stats])
    assert metrics["skipped_steps"] == 2 and metrics["optimizer_steps"] == 0
    assert all(torch.equal(a, b) for a, b in zip(before, params, strict=True))


def test_consecutive_skipped_steps_stop_the_run(tiny_sd3: Path, tmp_path: Path) -> None:
    config = load_config(
        EXAMPLE,
        [f"model.options.path={tiny_sd3}", f"run.output_dir={tmp_path}", "optim.max_consecutive_skips=2"],
    )
    trainer = Trainer(config)
    diverged = {"actor/skipped_steps": 2.0, "actor/optimizer_steps": 0.0}
    assert trainer._track_skips({"actor/skipped_steps": 0.0, "actor/optimizer_steps": 2.0}, 1, tmp_path)
    assert not trainer._track_skips(diverged, 2, tmp_path)
    with pytest.raises(RuntimeFailure, match="2 consecutive steps had a non-finite loss or gradient"):
        trainer._track_skips(diverged, 3, tmp_path)


def _files(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def test_a_diverging_run_stops_and_leaves_the_last_good_checkpoint_as_written(
    small_jpeg_args, tmp_path: Path, ray_cluster: None, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    """lr = 1e30: step 1's update overflows the LoRA, so from step 2 on every loss is NaN and every optimizer
    step is skipped; with max_consecutive_skips = 2 the run stops after step 3, keeping step 1's checkpoint."""
    out = tmp_path / "run"
    published: dict[str, dict[str, bytes]] = {}
    real_publish = checkpoint.publish

    def publish_and_record(run_dir: Path, staging: Path, step: int, keep_last: int) -> Path:
        final = real_publish(run_dir, staging, step, keep_last)
        published[final.name] = _files(final)
        return final

    monkeypatch.setattr(checkpoint, "publish", publish_and_record)
    # the conftest's small run, with these changes
    sets = ["run.steps=5", "optim.micro_batch=4", "optim.mini_batch=8", "optim.lr=1e30"]
    sets.append("optim.max_consecutive_skips=2")
    assert main(small_jpeg_args(out, *sets)) == 1
    captured = capsys.readouterr()
    text = " ".join((captured.out + captured.err).split())
    assert "stopped at step 3: 2 consecutive steps had a non-finite loss or gradient" in text
    assert f"the last good checkpoint is {out / 'checkpoints' / 'step_1'}" in text
    assert "--set run.resume=auto" in text and "Traceback" not in text

    rows = {r["step"]: r for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())}
    assert sorted(rows) == [1, 2, 3]
    assert rows[1]["actor/optimizer_steps"] >= 1
    for step in (2, 3):
        assert rows[step]["actor/optimizer_steps"] == 0 and rows[step]["actor/skipped_steps"] >= 1
        assert rows[step]["actor/loss"] is None  # NaN, written as null
    assert list(published) == ["step_1"]  # the skipped steps wrote no checkpoint
    latest = checkpoint.latest_checkpoint(out)
    assert latest == out / "checkpoints" / "step_1"
    assert _files(latest) == published["step_1"]  # byte for byte what was written after step 1
    assert {p.name for p in (out / "checkpoints").iterdir()} == {"latest", "step_1"}  # no staging left behind
