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


def _children(pid: int) -> list[str]:
    """The command lines of ``pid``'s child processes (``/proc/<pid>/task/*/children``)."""
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            with contextlib.suppress(OSError):
                found.append((Path("/proc") / child / "cmdline").read_bytes().replace(b"\0", b" ").decode())
    return found


def test_sigterm_while_ray_starts_stops_once_it_is_up_with_one_line_and_143(tmp_path: Path, tiny_sd3: Path) -> None:
    """qa-2026-12 N10: SIGTERM inside ``ray.init`` met Ray's own handler (``sys.exit(15)``): exit 15, no message,
    the session folder left behind. The run's handler now stays in place through Ray's start-up."""
    out, log, marker = tmp_path / "run", tmp_path / "run.log", uuid.uuid4().hex
    proc = _spawn(_run_args(out, tiny_sd3), log, marker)
    try:
        # Ray's GCS is the first process ray.init starts: from then on, and for seconds, ray.init is running
        _wait_for(lambda: any("gcs_server" in c for c in _children(proc.pid)), proc, log, timeout=120)
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=120) == 143, log.read_text()[-3000:]
    finally:
        _kill_group(proc)
    text = log.read_text()
    assert "SIGTERM: stopping as soon as Ray has started" in text, text[-3000:]
    assert "error: interrupted (SIGTERM) while Ray was starting; nothing was trained" in text, text[-3000:]
    assert "Traceback" not in text and "SIGTERM received" not in text, text[-3000:]
    assert not (out / "metrics.jsonl").exists() and checkpoint.latest_checkpoint(out) is None
    _assert_nothing_left(marker)


RAY_SIGNALS = """
import os, signal, threading, time
import ray
from omni_rl.runtime.ray_signals import init_keeping_handlers, rearm

seen = []
signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(ray.is_initialized()))
threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()  # while ray.init runs
init_keeping_handlers(ray.init)(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
os.kill(os.getpid(), signal.SIGTERM)  # Ray started: its core's C-level SIGTERM handler is replaced again
time.sleep(0.2)
ray.shutdown()
rearm()  # shutdown reset SIGTERM's C-level action to the default (death), behind Python's back
os.kill(os.getpid(), signal.SIGTERM)  # the second signal after a run's last checkpoint
time.sleep(0.2)
print("handled", seen)
"""


def test_ray_start_up_and_shutdown_keep_the_drivers_sigterm_handler() -> None:
    """The mechanism under both N10 findings, signal by signal (a run's exit adds timing around it): Ray's start-up
    installs SIGTERM handlers of its own, and its shutdown resets the C-level action, so without omni_rl's wrapper
    and re-arm the first and the last of these signals kill the process (exit 15 / -15) instead of being handled."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", RAY_SIGNALS], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "handled [False, True, False]" in done.stdout, done.stdout + done.stderr[-3000:]
