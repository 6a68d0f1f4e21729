"""Rollout workers apart from the policy workers (``[cluster] rollout_workers``) and one-step-off sampling
(``[run] max_staleness = 1``), end to end on the tiny SD3 pipeline and the session's Ray (2 CPUs: 1 policy + 1
rollout worker)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from omni_rl import load_config
from omni_rl.errors import RuntimeFailure
from omni_rl.runtime.rollout_group import RolloutGroup
from omni_rl.testing.runs import run_config

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"


def _grid(run: Path, step: int) -> np.ndarray:
    return np.asarray(Image.open(run / f"samples_step_{step}.png"))


def test_disaggregated_staleness_0_reproduces_the_colocated_run(tmp_path: Path, small_jpeg_run) -> None:
    """Flow-GRPO: the same step-1 images bit for bit (same weights, same seeds, same chunking), the same rewards
    and update metrics at every step (the weights the rollout worker receives are the policy's), and each batch
    sampled by the version of the update just before it."""
    colocated = small_jpeg_run(tmp_path / "colocated", 1, "log.image_every=1")
    apart = small_jpeg_run(tmp_path / "apart", 1, "log.image_every=1", "cluster.rollout_workers=1")
    assert np.array_equal(_grid(tmp_path / "colocated", 1), _grid(tmp_path / "apart", 1))
    for step, (a, b) in enumerate(zip(colocated, apart, strict=True), start=1):
        assert a["reward/mean"] == b["reward/mean"] and a["reward/std"] == b["reward/std"]
        for key in ("actor/loss", "actor/grad_norm", "actor/ratio_mean", "rollout_corr/abs_delta_mean"):
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-9), (step, key)
        assert b["rollout/version"] == step - 1 and b["rollout/staleness"] == 0
        assert b["perf/weight_sync_bytes"] > 0
    assert "rollout/version" not in colocated[0]


def test_one_step_off_samples_each_batch_with_the_version_one_update_behind(
    tmp_path: Path, small_jpeg_run, parts_submitted: list[int]
) -> None:
    """With the reward in an actor, each batch is handed to it when submitted ([run] stream_rewards): batch t+1
    is scored while step t trains."""
    rows = small_jpeg_run(
        tmp_path / "off",
        1,
        "cluster.rollout_workers=1",
        "run.max_staleness=1",
        "run.steps=3",
        "run.save_every=0",
        "cluster.rollout_cpus_per_worker=0.5",
        "reward.0.resources={CPU = 0.5}",
    )
    assert parts_submitted == [1, 1, 1]
    assert [r["rollout/version"] for r in rows] == [0, 0, 1]
    assert [r["rollout/staleness"] for r in rows] == [0, 1, 1]
    # the old log-probs are recomputed with the version that sampled: on-policy up to float rounding
    assert all(r["rollout_corr/abs_delta_max"] < 1e-4 for r in rows)


#: the shapes DiffusionNFT example on the tiny SD3 with the JPEG reward: two steps of 2 prompts x 2 images, two
#: denoising steps at 32 px, no validation
NFT_SETS = (
    "run.steps=2",
    "run.save_every=0",
    "run.eval_every=0",
    "run.eval_before_training=false",
    "cluster.cpus_per_worker=1",
    'reward.0.name="jpeg_compressibility"',
    "rollout.options.height=32",
    "rollout.options.width=32",
    "rollout.options.group_size=2",
    "rollout.options.batch_size=4",
    "rollout.options.steps=2",
    "rollout.options.eval_steps=2",
    "data.prompts_per_step=2",
    "loss.options.num_steps=2",
    "loss.options.timesteps=2",
    "log.image_every=1",
)


@pytest.mark.slow  # over 30 s; runs in `nox -s integration` (and the chaos session for faults)
def test_diffusion_nft_disaggregated_staleness_0_reproduces_the_colocated_run(
    tmp_path: Path, tiny_sd3: Path, ray_cluster: None
) -> None:
    """DiffusionNFT samples with its "old" adapter, which travels with the LoRA in every weights version: the
    rollout worker's step-1 images equal the colocated ones bit for bit, the rewards are equal at every step and
    the update metrics equal to float rounding."""
    example = Path(__file__).parents[2] / "docs" / "examples" / "shapes_diffusion_nft.toml"

    def run(out: Path, *extra: str) -> list[dict]:
        return run_config(example, out, ['model.name="sd3"', f"model.options.path={tiny_sd3}", *NFT_SETS, *extra])

    colocated = run(tmp_path / "colocated")
    apart = run(tmp_path / "apart", "cluster.rollout_workers=1")
    assert np.array_equal(_grid(tmp_path / "colocated", 1), _grid(tmp_path / "apart", 1))
    assert len(colocated) == len(apart) == 2
    for step, (a, b) in enumerate(zip(colocated, apart, strict=True), start=1):
        assert a["reward/mean"] == b["reward/mean"] and a["reward/std"] == b["reward/std"], step
        actor = [k for k in a if k.startswith("actor/")]
        assert "actor/old_deviation" in actor and sorted(actor) == sorted(k for k in b if k.startswith("actor/"))
        for key in actor:
            assert b[key] == pytest.approx(a[key], rel=1e-5, abs=1e-9), (step, key)
        assert b["rollout/version"] == step - 1 and b["rollout/staleness"] == 0


@pytest.mark.slow  # over 30 s; runs in `nox -s integration` (and the chaos session for faults)
def test_one_step_off_resume_resamples_the_in_flight_batch(tmp_path: Path, small_jpeg_run) -> None:
    """A checkpoint after step 1 keeps the version that sampled batch 2 (0); the resumed run re-samples batch 2
    with it and continues as the uninterrupted run did."""
    sets = ("cluster.rollout_workers=1", "run.max_staleness=1", "run.steps=3")
    whole = small_jpeg_run(tmp_path / "whole", 1, *sets)
    small_jpeg_run(tmp_path / "cut", 1, *sets[:2], "run.steps=1")
    resumed = small_jpeg_run(tmp_path / "cut", 1, *sets, "run.resume=auto")
    by_step = {r["step"]: r for r in resumed if "reward/mean" in r}
    for row in whole[1:]:
        got = by_step[row["step"]]
        assert got["rollout/version"] == row["rollout/version"]
        assert got["reward/mean"] == row["reward/mean"]
        assert got["actor/grad_norm"] == pytest.approx(row["actor/grad_norm"], rel=1e-5)


def test_refused_combinations_name_their_option(tmp_path: Path, tiny_sd3: Path) -> None:
    from omni_rl.errors import ConfigError
    from omni_rl.train.trainer import Trainer

    base = [f"model.options.path={tiny_sd3}", f"run.output_dir={tmp_path}"]
    config = load_config(EXAMPLE, [*base, "run.max_staleness=1"])
    with pytest.raises(ConfigError, match=r"\$\.run\.max_staleness"):
        Trainer(config)
    config = load_config(EXAMPLE, [*base, "rollout_correction.mode=decoupled", "optim.recompute_old_log_probs=false"])
    with pytest.raises(ConfigError, match=r"\$\.optim\.recompute_old_log_probs"):
        Trainer(config)


def test_a_dead_rollout_worker_is_named_with_the_resume_command(
    tiny_sd3: Path, tmp_path: Path, ray_cluster: None
) -> None:
    import ray

    config = load_config(
        EXAMPLE,
        [f"model.options.path={tiny_sd3}", f"run.output_dir={tmp_path}", "cluster.rollout_workers=1"],
    )
    group = RolloutGroup(config, lambda: "resume with: omni-rl run x --set run.resume=auto")
    try:
        pid = group.infos[0]["pid"]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        with pytest.raises(RuntimeFailure, match=rf"rollout worker 0 \(pid {pid} on .+\) died while") as excinfo:
            group.call("ready")
        assert "--set run.resume=auto" in str(excinfo.value)
    finally:
        ray.util.remove_placement_group(group.placement)
