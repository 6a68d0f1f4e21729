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
#: the example shrunk to one step of 2 prompts x 2 images at 32 px
SMALL_RUN = (
    "run.steps=1",
    "rollout.options.height=32",
    "rollout.options.width=32",
    "rollout.options.group_size=2",
    "rollout.options.batch_size=2",
    "data.prompts_per_step=2",
    "optim.micro_batch=2",
    "optim.mini_batch=4",
    "cluster.cpus_per_worker=1",
    "log.image_every=0",
)


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
        with pytest.raises(
            RuntimeFailure, match=rf"policy worker 0 \(pid {pid} on .+\) died while starting"
        ) as excinfo:
            group.call("ready")
        assert "--set run.resume=auto" in str(excinfo.value)
    finally:
        ray.util.remove_placement_group(group.placement)


def test_a_peer_dying_before_a_two_worker_update_is_named_with_the_trainers_resume_command(
    tmp_path: Path, tiny_sd3: Path, ray_cluster: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Rank 1 is SIGKILLed between the rollout and the update of step 1: rank 0 then waits for it inside the
    gradient all-reduce. The run must stop within seconds (not the process group's timeout) with an error that
    names rank 1 and the resume command the Trainer prints, through the CLI."""
    from omni_rl.cli import main
    from omni_rl.train.trainer import Trainer

    killed: dict[str, float] = {}
    rollout = WorkerGroup.rollout

    def rollout_then_kill_rank_1(self: WorkerGroup, request):
        out = rollout(self, request)
        if request.mode == "train" and not killed:
            pid = self.infos[1]["pid"]
            os.kill(pid, signal.SIGKILL)
            _wait_until_dead(pid)
            killed.update(pid=pid, at=time.monotonic())
        return out

    monkeypatch.setattr(WorkerGroup, "rollout", rollout_then_kill_rank_1)
    out = tmp_path / "run"
    sets = [f"run.output_dir={out}", f"model.options.path={tiny_sd3}", *SMALL_RUN, "cluster.workers=2"]
    code = main(["run", str(EXAMPLE), *[a for s in sets for a in ("--set", s)]])
    elapsed = time.monotonic() - killed["at"]
    captured = capsys.readouterr()
    text = captured.out + captured.err
    assert code == 1, text
    assert f"error: policy worker 1 (pid {int(killed['pid'])} on " in text
    assert "died while updating (step 1)" in text
    assert f"resume with: {Trainer.resume_command(out)}" in text
    assert "rerun with --debug" not in text  # a named failure, not an unexpected error
    assert elapsed < 60, elapsed  # the error and the shutdown of the stuck rank 0, far below the 30 min timeout


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
