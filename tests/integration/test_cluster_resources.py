"""A run that asks for more than the Ray cluster has fails within seconds, saying what is missing (no hang): GPU
workers on the CPU-only test cluster, and a reward actor the cluster cannot hold."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from omni_rl.cli import main

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"
#: far below the 120 s placement timeouts the check replaces
FAST_S = 30.0


def _run(tmp_path: Path, tiny_sd3: Path, capsys: pytest.CaptureFixture, *sets: str) -> tuple[int, str, float]:
    args = ["run", str(EXAMPLE)]
    for s in (f"run.output_dir={tmp_path / 'run'}", f"model.options.path={tiny_sd3}", "cluster.cpus_per_worker=1"):
        args += ["--set", s]
    for s in sets:
        args += ["--set", s]
    start = time.monotonic()
    code = main(args)
    elapsed = time.monotonic() - start
    captured = capsys.readouterr()
    return code, captured.out + captured.err, elapsed


def test_gpu_workers_on_a_cpu_only_cluster_fail_fast(
    tmp_path: Path, tiny_sd3: Path, ray_cluster: None, capsys: pytest.CaptureFixture
) -> None:
    code, text, elapsed = _run(tmp_path, tiny_sd3, capsys, "cluster.gpus_per_worker=1")
    assert code == 1, text
    assert "the Ray cluster cannot place the run: GPU: need 1 (1 worker(s) x 1), cluster has 0" in text
    assert "hint: lower [cluster] workers / cpus_per_worker / gpus_per_worker" in text
    assert elapsed < FAST_S, elapsed


def test_a_reward_actor_the_cluster_cannot_hold_fails_before_the_first_step(
    tmp_path: Path, tiny_sd3: Path, ray_cluster: None, capsys: pytest.CaptureFixture
) -> None:
    code, text, elapsed = _run(tmp_path, tiny_sd3, capsys, "reward.0.resources={GPU = 1}")
    assert code == 1, text
    assert "GPU: need 1 (reward actors 1), cluster has 0" in text
    assert "reward actor 1 needs 1 CPU, 1 GPU on one node" in text
    assert elapsed < FAST_S, elapsed
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # nothing ran
