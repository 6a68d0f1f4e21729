"""Run lifecycle: exact resume after SIGKILL, SIGINT with a checkpoint, a second SIGINT exiting at once,
refusing to overwrite a run, a failed checkpoint write leaving the previous one intact."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from omni_rl.cli import main
from omni_rl.rundir import checkpoint

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"
PROMPTS = Path(__file__).parents[2] / "docs" / "examples" / "prompts" / "objects.txt"
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1"}


def _args(out: Path, tiny_sd3: Path, *extra: str) -> list[str]:
    sets = [
        f"run.output_dir={out}",
        f"model.options.path={tiny_sd3}",
        "run.steps=6",
        "run.save_every=1",
        "rollout.options.height=32",
        "rollout.options.width=32",
        "rollout.options.group_size=4",
        "log.image_every=0",
        'optim.lr_schedule="cosine"',
        *extra,
    ]
    return ["run", str(EXAMPLE), *[a for s in sets for a in ("--set", s)]]


def _spawn(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "omni_rl.cli", *args],
        env=ENV,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _wait_for(predicate, proc: subprocess.Popen, log: Path, timeout: float = 400) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _rows(run_dir: Path) -> dict[int, dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {row["step"]: {k: v for k, v in row.items() if not k.startswith("perf/")} for row in rows}


def _latest_is(run_dir: Path, name: str):
    pointer = run_dir / "checkpoints" / "latest"
    return lambda: pointer.exists() and pointer.read_text().strip() == name


def _kill_group(proc: subprocess.Popen) -> None:
    """Whatever the run started (its embedded Ray) goes with it; a run already gone is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_sigkill_then_resume_matches_the_uninterrupted_run_bit_for_bit(
    tmp_path: Path, tiny_sd3: Path, ray_cluster: None
) -> None:
    # checkpoints at steps 3 and 6 only: killed once step_3 is published, the run resumes from step 3 exactly
    # (three steps pass before the next checkpoint); validation every 2 steps puts val/* among what is compared
    sets = (
        "run.save_every=3",
        "run.eval_every=2",
        f"data.val={PROMPTS}",
        "data.val_prompts=2",
    )
    straight = tmp_path / "straight"
    assert main(_args(straight, tiny_sd3, *sets)) == 0

    killed = tmp_path / "killed"
    proc = _spawn(_args(killed, tiny_sd3, *sets), tmp_path / "killed.log")
    _wait_for(_latest_is(killed, "step_3"), proc, tmp_path / "killed.log")
    _kill_group(proc)
    assert checkpoint.latest_checkpoint(killed) == killed / "checkpoints" / "step_3"

    resume = subprocess.run(
        [sys.executable, "-m", "omni_rl.cli", *_args(killed, tiny_sd3, *sets, 'run.resume="auto"')],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resume.returncode == 0, resume.stdout + resume.stderr
    assert "at step 4" in resume.stdout
    expected, got = _rows(straight), _rows(killed)
    assert sorted(got) == [1, 2, 3, 4, 5, 6]
    assert all("val/reward/mean" in got[step] for step in (2, 4, 6))
    for step in range(4, 7):
        assert got[step] == expected[step], f"step {step} differs after resume"


def test_sigint_checkpoints_and_exits_130(tmp_path: Path, tiny_sd3: Path) -> None:
    out = tmp_path / "run"
    log = tmp_path / "run.log"
    proc = _spawn(_args(out, tiny_sd3, "run.save_every=0"), log)
    metrics = out / "metrics.jsonl"
    _wait_for(lambda: metrics.exists() and metrics.read_text().count("\n") >= 1, proc, log)
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=300) == 130, log.read_text()[-3000:]
    text = log.read_text()
    assert "--set run.resume=auto" in text and "Traceback" not in text
    latest = checkpoint.latest_checkpoint(out)
    assert latest is not None and (latest / "pytorch_lora_weights.safetensors").exists()
    step = checkpoint.read_json(latest / "trainer_state.json")["step"]
    assert step < 6 and max(_rows(out)) == step


@pytest.mark.slow  # over 30 s; runs in `nox -s integration` (and the chaos session for faults)
def test_a_second_sigint_exits_at_once_and_the_last_checkpoint_resumes(tmp_path: Path, tiny_sd3: Path) -> None:
    out = tmp_path / "run"
    log = tmp_path / "run.log"
    proc = _spawn(_args(out, tiny_sd3, "run.steps=3"), log)
    try:
        _wait_for(_latest_is(out, "step_1"), proc, log)
        os.kill(proc.pid, signal.SIGINT)
        _wait_for(lambda: "Ctrl-C again" in log.read_text(), proc, log, timeout=60)  # the first one is handled
        os.kill(proc.pid, signal.SIGINT)
        sent = time.monotonic()
        assert proc.wait(timeout=30) == 130, log.read_text()[-3000:]
        assert time.monotonic() - sent < 15, "the second SIGINT waited for the step to finish"
        assert "second Ctrl-C: exiting now" in log.read_text()
    finally:
        _kill_group(proc)
    latest = checkpoint.latest_checkpoint(out)
    assert latest is not None and (out / "checkpoints" / "latest").read_text().strip() == latest.name
    saved = int(checkpoint.read_json(latest / "trainer_state.json")["step"])
    assert saved in (1, 2)  # the step in flight when the second SIGINT came was abandoned, not half-written

    resume = subprocess.run(
        [sys.executable, "-m", "omni_rl.cli", *_args(out, tiny_sd3, "run.steps=3", 'run.resume="auto"')],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resume.returncode == 0, resume.stdout + resume.stderr
    assert f"at step {saved + 1}" in resume.stdout
    assert sorted(_rows(out)) == [1, 2, 3]
    assert checkpoint.latest_checkpoint(out) == out / "checkpoints" / "step_3"


def test_an_existing_run_is_not_overwritten(tmp_path: Path, tiny_sd3: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "run"
    (out / "checkpoints").mkdir(parents=True)
    (out / "metrics.jsonl").write_text('{"step": 1}\n')
    assert main(_args(out, tiny_sd3)) == 2
    err = capsys.readouterr()
    assert "already holds a run" in err.out + err.err and "--set run.resume=auto" in err.out + err.err
    assert (out / "metrics.jsonl").read_text() == '{"step": 1}\n'


def test_a_failed_checkpoint_write_keeps_the_previous_one(
    tmp_path: Path, tiny_sd3: Path, ray_cluster: None, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    out = tmp_path / "run"
    real_write_json = checkpoint.write_json
    calls = {"n": 0}

    def disk_full_on_the_third_checkpoint(path: Path, obj) -> None:
        if path.name == "trainer_state.json":
            calls["n"] += 1
            if calls["n"] == 3:
                raise OSError(28, "No space left on device")
        real_write_json(path, obj)

    monkeypatch.setattr(checkpoint, "write_json", disk_full_on_the_third_checkpoint)
    assert main(_args(out, tiny_sd3)) == 1
    captured = capsys.readouterr()
    assert "could not write the checkpoint of step 3" in captured.out + captured.err
    assert (out / "checkpoints" / "latest").read_text().strip() == "step_2"
    assert checkpoint.latest_checkpoint(out) == out / "checkpoints" / "step_2"
    assert not (out / "checkpoints" / ".tmp_step_3").exists()
