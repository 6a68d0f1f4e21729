"""``omni-rl run`` with a managed judge server (issue 54, "done when"), the stand-in server process posing as vLLM:
a 2-step run scores with it and leaves no process behind; a server that cannot start ends the run with exit 1
and one line naming the model, the port and the server's last error, nothing left; SIGTERM during the run
(exit 143) leaves nothing either. Each run is a CLI process of its own (its own Ray), as a user starts it; every
process it starts carries a marker variable, and none may be alive after it exits. The failed start (~40 s) is
in the default suite; the two whole runs are marked slow."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from managed_helpers import fake_server, new_marker, none_left

QUICKSTART = Path(__file__).parents[3] / "docs" / "examples" / "quickstart.toml"
#: quickstart shrunk to seconds a step: 2 prompts x 2 images at 32 px, 2 denoising steps, no evaluation
SMALL = (
    "run.steps=2",
    "run.save_every=0",
    "run.eval_every=0",
    "run.eval_before_training=false",
    "data.prompts_per_step=2",
    "rollout.options.group_size=2",
    "rollout.options.batch_size=4",
    "rollout.options.steps=2",
    "sampler.options.window_range=[0, 1]",
    "sampler.options.window_size=1",
    "optim.micro_batch=4",
    "optim.mini_batch=4",
    "cluster.cpus_per_worker=1",
    "log.image_every=0",
)


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)  # strings, numbers, booleans and lists read the same in TOML


def write_config(path: Path, server: dict[str, Any], **options: Any) -> Path:
    """quickstart.toml with the shapes reward replaced by a managed vlm_judge (yes_prob on a yes/no template)."""
    judge = {"server": server, "template": "matches", "score": "yes_prob", "backoff_s": 0.05, **options}
    text = QUICKSTART.read_text()
    assert '[[reward]]\nname = "shapes"\n' in text
    text = text.replace('[[reward]]\nname = "shapes"\n', f'[[reward]]\nname = "vlm_judge"\noptions = {_toml(judge)}\n')
    path.write_text(text)
    return path


def spawn(config: Path, out: Path, marker: str, log: Path, *sets: str) -> subprocess.Popen:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "OMNI_RL_TEST_MARKER": marker, "COLUMNS": "200"}
    args = [sys.executable, "-m", "omni_rl.cli", "run", str(config), "--set", f"run.output_dir={out}"]
    for item in (*SMALL, *sets):
        args += ["--set", item]
    return subprocess.Popen(args, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)


def finish(proc: subprocess.Popen, log: Path, timeout: float = 400) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail("the run did not end in time: " + log.read_text()[-3000:])


@pytest.mark.slow  # ~45 s on 2 cores; nox -s vllm runs the same through a real vLLM server
def test_a_run_scores_with_its_managed_server_and_leaves_nothing(tmp_path: Path) -> None:
    marker = new_marker()
    config = write_config(tmp_path / "judge.toml", fake_server(marker))
    log = tmp_path / "run.log"
    code = finish(spawn(config, tmp_path / "out", marker, log), log)
    text = log.read_text()
    assert code == 0, text[-3000:]
    rows = [json.loads(line) for line in (tmp_path / "out" / "metrics.jsonl").read_text().splitlines()]
    means = [row["reward/vlm_judge/mean"] for row in rows if "reward/vlm_judge/mean" in row]
    assert len(means) == 2 and all(0.0 < m < 1.0 for m in means)
    assert not any(row.get("reward/vlm_judge/failures") for row in rows)
    server_log = (tmp_path / "out" / "reward_servers" / "vlm_judge-server-0.log").read_text()
    assert "fake judge server ready" in server_log
    assert none_left(marker, timeout=30) == []


def test_a_server_that_cannot_start_ends_the_run_with_one_line_and_nothing_left(tmp_path: Path) -> None:
    marker = new_marker()
    server = fake_server(marker, "--fail-start", "/models/missing does not appear to have a file named config.json")
    config = write_config(tmp_path / "judge.toml", server)
    log = tmp_path / "run.log"
    code = finish(spawn(config, tmp_path / "out", marker, log), log)
    text = log.read_text()
    assert code == 1, text[-3000:]
    (line,) = [line for line in text.splitlines() if "could not start" in line]
    assert re.search(r"model 'fake-judge' at 127\.0\.0\.1:\d+ could not start: the server exited with status 1", line)
    assert line.endswith("OSError: /models/missing does not appear to have a file named config.json")
    before_hint = text.split("\nhint: ", 1)[0]  # the hint quotes the server's log, its traceback included
    assert "Traceback" not in before_hint and "RayTaskError" not in text
    assert none_left(marker, timeout=30) == []


@pytest.mark.slow  # ~40 s on 2 cores; the guard and actor-kill tests of test_rewards_remote_managed.py are fast
def test_sigterm_during_a_run_with_a_managed_server_leaves_nothing(tmp_path: Path) -> None:
    marker = new_marker()
    config = write_config(tmp_path / "judge.toml", fake_server(marker))
    log = tmp_path / "run.log"
    out = tmp_path / "out"
    proc = spawn(config, out, marker, log, "run.steps=50")
    deadline = time.monotonic() + 300
    metrics = out / "metrics.jsonl"
    while not (metrics.exists() and metrics.read_text().strip()):
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "no step in time: " + log.read_text()[-3000:]
        time.sleep(0.1)
    assert len(none_left(marker, timeout=0)) > 0  # the run, Ray and the server are up
    os.kill(proc.pid, signal.SIGTERM)
    code = finish(proc, log)
    assert code == 143, log.read_text()[-3000:]
    assert none_left(marker, timeout=30) == []


@pytest.mark.slow  # ~40 s on 2 cores
def test_a_signal_while_the_server_starts_ends_the_run_at_once_and_leaves_nothing(tmp_path: Path) -> None:
    """A judge that takes minutes to load: one SIGTERM ends the wait (the run's own handler would otherwise let
    the start finish first), exit 143, nothing left."""
    from managed_helpers import left_behind

    marker = new_marker()
    config = write_config(tmp_path / "judge.toml", fake_server(marker, "--start-delay", "300", ready_timeout_s=600))
    log = tmp_path / "run.log"
    proc = spawn(config, tmp_path / "out", marker, log)
    deadline = time.monotonic() + 300
    while not any("fake_judge_server" in line for line in left_behind(marker)):
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.1)
    os.kill(proc.pid, signal.SIGTERM)
    began = time.monotonic()
    assert finish(proc, log, timeout=60) == 143, log.read_text()[-3000:]
    assert time.monotonic() - began < 30
    assert "while the vlm_judge reward's servers started; nothing was trained" in log.read_text()
    assert none_left(marker, timeout=30) == []
