"""SIGTERM (a scheduler's preemption, ``docker stop``) ends a run like Ctrl-C: the step finishes, is checkpointed,
the resume command is printed, exit 143. A second Ctrl-C right after the step still prints the checkpoint line.
``serve-reward`` stops cleanly on SIGTERM and leaves no process behind.

Every process a command starts inherits a marker variable; after the command exits, none may be left (read from
``/proc/<pid>/environ``). All waits have timeouts, and the process group is killed at the end whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from omni_rl.rundir import checkpoint

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "sd3_tiny_jpeg.toml"


def _spawn(args: list[str], log: Path, marker: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "OMNI_RL_TEST_MARKER": marker}
    return subprocess.Popen(
        [sys.executable, "-m", "omni_rl.cli", *args],
        env=env,
        cwd=ROOT,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _run_args(out: Path, tiny_sd3: Path) -> list[str]:
    sets = [
        f"run.output_dir={out}",
        f"model.options.path={tiny_sd3}",
        "run.steps=50",
        "run.save_every=0",
        "rollout.options.height=32",
        "rollout.options.width=32",
        "rollout.options.group_size=4",
        "cluster.cpus_per_worker=1",
        "log.image_every=0",
    ]
    return ["run", str(EXAMPLE), *[a for s in sets for a in ("--set", s)]]


def _wait_for(predicate, proc: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "timed out: " + log.read_text()[-3000:]
        time.sleep(0.05)


def _rows(out: Path) -> int:
    metrics = out / "metrics.jsonl"
    return metrics.read_text().count("\n") if metrics.exists() else 0


def _left_behind(marker: str) -> list[str]:
    """Live processes (not zombies) carrying ``marker`` in their environment."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"OMNI_RL_TEST_MARKER={marker}".encode() not in (proc / "environ").read_bytes():
                continue
            if "State:\tZ" in (proc / "status").read_text():
                continue
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            found.append(f"{proc.name}: {command[:120]}")
        except OSError:
            continue
    return found


def _assert_nothing_left(marker: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while (left := _left_behind(marker)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == [], left


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def test_sigterm_mid_step_checkpoints_prints_the_resume_command_and_exits_143(tmp_path: Path, tiny_sd3: Path) -> None:
    out, log, marker = tmp_path / "run", tmp_path / "run.log", uuid.uuid4().hex
    proc = _spawn(_run_args(out, tiny_sd3), log, marker)
    try:
        _wait_for(lambda: _rows(out) >= 1, proc, log)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=300) == 143, log.read_text()[-3000:]
    finally:
        _kill_group(proc)
    text = log.read_text()
    assert "SIGTERM: finishing this step" in text
    assert f"resume with: omni-rl run {out / 'config.resolved.toml'} --set run.resume=auto" in text, text[-3000:]
    assert "Traceback" not in text and "SIGTERM received" not in text, text[-3000:]  # no crash dump
    latest = checkpoint.latest_checkpoint(out)
    assert latest is not None
    saved = int(checkpoint.read_json(latest / "trainer_state.json")["step"])
    logged = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert saved == max(logged) < 50  # the step in flight was finished and checkpointed (save_every = 0)
    _assert_nothing_left(marker)


@pytest.mark.slow  # over 30 s; runs in `nox -s integration` (and the chaos session for faults)
def test_a_second_ctrl_c_just_after_the_step_prints_the_saved_checkpoint(tmp_path: Path, tiny_sd3: Path) -> None:
    out, log, marker = tmp_path / "run", tmp_path / "run.log", uuid.uuid4().hex
    proc = _spawn(_run_args(out, tiny_sd3), log, marker)
    try:
        _wait_for(lambda: _rows(out) >= 1, proc, log)
        os.kill(proc.pid, signal.SIGINT)
        # the interrupted step is saved; the second Ctrl-C lands in the shutdown that follows
        _wait_for(lambda: "checkpoint: " in log.read_text(), proc, log)
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=60) == 130, log.read_text()[-3000:]
    finally:
        _kill_group(proc)
    text = log.read_text()
    after = text[text.index("checkpoint: ") :]
    latest = checkpoint.latest_checkpoint(out)
    assert latest is not None
    assert f"checkpoint saved in {latest}" in after.replace("\n", ""), text[-3000:]
    assert "--set run.resume=auto" in after, text[-3000:]


def test_serve_reward_stops_on_sigterm_and_leaves_no_process(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve = tmp_path / "serve.toml"
    serve.write_text(f'[server]\nport = {port}\n\n[[reward]]\nname = "jpeg_compressibility"\nreplicas = 1\n')
    log, marker = tmp_path / "serve.log", uuid.uuid4().hex
    proc = _spawn(["serve-reward", str(serve)], log, marker)
    try:
        _wait_for(lambda: "stops the servers" in log.read_text(), proc, log)
        assert _left_behind(marker), "the marker does not reach the processes serve-reward started"
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=120) == 143, log.read_text()[-3000:]
    finally:
        _kill_group(proc)
    text = log.read_text()
    assert "Traceback" not in text and "SIGTERM received" not in text, text[-3000:]
    _assert_nothing_left(marker)
