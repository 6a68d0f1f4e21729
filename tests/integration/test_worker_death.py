"""A policy worker that dies becomes an error naming it and the resume command, not a hang."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from omni_rl import load_config
from omni_rl.errors import RuntimeFailure
from omni_rl.runtime.group import WorkerGroup

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"


def test_a_dead_worker_is_named_with_the_resume_command(tiny_sd3: Path, tmp_path: Path, ray_cluster: None) -> None:
    import ray

    config = load_config(
        EXAMPLE, [f"model.options.path={tiny_sd3}", f"run.output_dir={tmp_path}", "cluster.cpus_per_worker=1"]
    )
    group = WorkerGroup(config, lambda: "resume with: omni-rl run x --set run.resume=auto")
    try:
        # SIGKILL the worker's process (what an OOM kill or a lost node does) and wait until it is gone:
        # ray.kill is asynchronous, and a call racing it can still be served by the live actor.
        pid = group.infos[0]["pid"]
        os.kill(pid, signal.SIGKILL)
        _wait_until_dead(pid)
        with pytest.raises(RuntimeFailure, match="policy worker 0 died while ready") as excinfo:
            group.call("ready")
        assert "--set run.resume=auto" in str(excinfo.value)
    finally:
        ray.util.remove_placement_group(group.placement)


def _wait_until_dead(pid: int, timeout_s: float = 30.0) -> None:
    """Until the process no longer runs (gone, or a zombie its parent has not reaped yet)."""
    deadline = time.monotonic() + timeout_s
    status = Path(f"/proc/{pid}/status")
    while time.monotonic() < deadline:
        try:
            if "State:\tZ" in status.read_text():
                return
        except FileNotFoundError:
            return
        time.sleep(0.05)
    raise AssertionError(f"worker process {pid} still runs {timeout_s} s after SIGKILL")
