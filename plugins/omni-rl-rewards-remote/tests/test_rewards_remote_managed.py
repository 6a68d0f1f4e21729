"""Managed judge servers (issue 54) with a stand-in server process (tests/fake_judge_server.py), no vLLM: start
and readiness, a start that fails (one line with the model, the port and the server's last error; nothing left
running), requests with the run's own key spread over replicas, yes_prob from log-probs, a replica that dies
restarted, stop on close and when the owner dies (the guard), and the options' rules. Without Ray (the servers
are child processes) and in a Ray session (each replica an actor), sharing one small Ray."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from managed_helpers import fake_server, new_marker, none_left
from omni_rl_rewards_remote import hooks
from omni_rl_rewards_remote.managed.config import ManagedServerConfig
from omni_rl_rewards_remote.managed.process import ServerProcess, last_error

from omni_rl.config import structure_options
from omni_rl.errors import RuntimeFailure

IMAGES = np.random.default_rng(3).integers(0, 256, size=(6, 8, 8, 3), dtype=np.uint8)
PROMPTS = [f"prompt {i}" for i in range(6)]
KEY = "a-test-key-of-some-length"
FAST = {"backoff_s": 0.01, "max_backoff_s": 0.05, "max_retries": 1, "timeout_s": 10}


def _judge(server: dict[str, Any], log_dir: Path, **options: Any) -> Any:
    from omni_rl_rewards_remote.vlm_judge import VlmJudgeReward

    (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == "vlm_judge"]
    config = structure_options(spec, {"server": server, "template": "matches", **FAST, **options})
    return VlmJudgeReward(config, log_dir=log_dir)


@pytest.fixture(scope="module")
def small_ray() -> Any:
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


# -- options ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"model": "m"}, "set base_url (a server you run) or server"),
        ({"base_url": "http://h:1/v1", "server": {"model": "m"}}, "set base_url or server, not both"),
        ({"server": {"model": "m"}, "api_key_env": "KEY"}, "api_key_env is for a server you run"),
        ({"server": {"engine": "vllm"}}, "server.model must name the model vLLM serves"),
        ({"server": {"engine": "command", "model": "m"}}, "server.command must be the server's command line"),
        ({"server": {"model": "m", "env": {"VLLM_API_KEY": "x"}}}, "env may not set VLLM_API_KEY"),
        ({"server": {"model": "m", "port": 8000, "replicas": 2}}, "a fixed server.port on loopback serves one"),
    ],
)
def test_server_options_are_checked(options: dict[str, Any], message: str) -> None:
    from omni_rl.errors import ConfigError

    (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == "vlm_judge"]
    with pytest.raises((ValueError, ConfigError)) as excinfo:
        structure_options(spec, options)
    assert message in str(excinfo.value)


def test_a_vllm_server_is_the_api_server_module_with_the_key_in_its_environment() -> None:
    from omni_rl_rewards_remote.managed.command import server_command, server_env

    config = ManagedServerConfig(model="/m/judge", args=("--max-model-len", "512"), python="/venv/bin/python")
    command = server_command(config, "127.0.0.1", 8123, served_name="judge")
    assert command == [
        "/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/judge", "--host",
        "127.0.0.1", "--port", "8123", "--served-model-name", "judge", "--max-model-len", "512",
    ]  # fmt: skip
    env = server_env(config, "k3y", base={})
    assert env["VLLM_API_KEY"] == "k3y" and "k3y" not in " ".join(command)


def test_the_last_error_is_the_exception_line_not_the_traceback_frame() -> None:
    lines = ["INFO loading", "Traceback (most recent call last):", '  File "x.py", line 3', "OSError: no config.json"]
    assert last_error(lines) == "OSError: no config.json"
    assert last_error(["just a line"]) == "just a line" and last_error([]) == ""


# -- one process, no Ray --------------------------------------------------------------------------------------
def test_a_server_starts_answers_with_its_key_and_stops_with_its_whole_group(tmp_path: Path) -> None:
    marker = new_marker()
    config = ManagedServerConfig(**fake_server(marker, "--grandchild"))
    server = ServerProcess(config, "the-key", tmp_path / "s.log", "fake-judge")
    result = server.start()
    try:
        assert result.ok, result
        assert result.url == f"http://127.0.0.1:{result.port}/v1"
        assert len(none_left(marker, timeout=0)) == 3  # the guard, the server, its grandchild
    finally:
        server.stop()
    assert none_left(marker) == []
    assert "the-key" not in (tmp_path / "s.log").read_text()


def test_a_server_that_cannot_start_fails_at_once_with_its_last_error_and_leaves_nothing(tmp_path: Path) -> None:
    marker = new_marker()
    config = ManagedServerConfig(**fake_server(marker, "--fail-start", "/models/nowhere is not a directory"))
    result = ServerProcess(config, KEY, tmp_path / "s.log", "fake-judge").start()
    assert not result.ok and result.seconds < 15
    assert result.error.startswith("the server exited with status 1 before it was ready: OSError: /models/nowhere")
    assert none_left(marker) == []


def test_a_server_not_ready_in_time_is_stopped(tmp_path: Path) -> None:
    marker = new_marker()
    config = ManagedServerConfig(**fake_server(marker, "--start-delay", "60", ready_timeout_s=1.5))
    result = ServerProcess(config, KEY, tmp_path / "s.log", "fake-judge").start()
    assert "was not ready within 1.5 s (server.ready_timeout_s)" in result.error
    assert none_left(marker) == []


def test_the_guard_stops_the_server_when_its_owner_is_killed(tmp_path: Path) -> None:
    """The owner (here a Python process standing in for the server's actor) is SIGKILLed: no stop() runs, and
    the guard, seeing its stdin close, takes the server's group down."""
    marker = new_marker()
    owner_code = (
        "import sys, time; from pathlib import Path\n"
        "from omni_rl_rewards_remote.managed.config import ManagedServerConfig\n"
        "from omni_rl_rewards_remote.managed.process import ServerProcess\n"
        f"config = ManagedServerConfig(**{fake_server(marker, '--grandchild')!r})\n"
        f"result = ServerProcess(config, 'k', Path({str(tmp_path / 's.log')!r}), 'fake-judge').start()\n"
        "print('READY' if result.ok else result.error, flush=True); time.sleep(600)\n"
    )
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "READY"
        assert len(none_left(marker, timeout=0)) == 3
    finally:
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
    assert none_left(marker) == []


# -- the judge on managed servers -------------------------------------------------------------------------------
def test_without_ray_the_judge_starts_its_servers_scores_and_stops_them(tmp_path: Path) -> None:
    marker = new_marker()
    judge = _judge(fake_server(marker), tmp_path, score="yes_prob")
    try:
        first = judge(IMAGES, PROMPTS, [{}] * 6)
        key = judge.servers.api_key
        assert first.failures == 0 and len(set(first.scores.tolist())) > 1
        assert np.all((first.scores > 0) & (first.scores < 1))
    finally:
        judge.close()
    assert none_left(marker) == []
    again = _judge(fake_server(marker), tmp_path, score="yes_prob")
    try:  # a new run: a new key, the same scores (the server's answers depend on the images only)
        np.testing.assert_array_equal(again(IMAGES, PROMPTS, [{}] * 6).scores, first.scores)
        assert again.servers.api_key != key
    finally:
        again.close()
    assert key not in "".join(p.read_text() for p in tmp_path.glob("*.log"))


def test_replicas_share_the_requests_and_a_dead_one_is_restarted(tmp_path: Path, small_ray: Any) -> None:
    marker = new_marker()
    die_once = tmp_path / "died"
    server = fake_server(marker, "--die-after", "2", "--die-once", str(die_once), replicas=2)
    judge = _judge(server, tmp_path, concurrency=1)
    try:
        judge.start()
        urls = {replica.url for replica in judge.servers.replicas}
        assert len(urls) == 2
        scores = judge(IMAGES, PROMPTS, [{}] * 6)
        assert die_once.exists()  # a replica died after its second answer ...
        assert scores.failures == 0  # ... and was restarted; its calls went again
        assert sum(replica.restarts for replica in judge.servers.replicas) in (1, 2)  # one or both died
    finally:
        judge.close()
    assert none_left(marker) == []


def test_a_managed_start_failure_in_ray_is_one_line_naming_model_port_and_error(tmp_path: Path, small_ray: Any) -> None:
    marker = new_marker()
    judge = _judge(fake_server(marker, "--fail-start", "Can't load the model at /models/nowhere"), tmp_path)
    with pytest.raises(RuntimeFailure) as excinfo:
        judge.start()
    message = excinfo.value.message
    assert "\n" not in message
    assert "model 'fake-judge' at 127.0.0.1:" in message
    assert message.endswith("OSError: Can't load the model at /models/nowhere")
    assert "fake-judge-server-0.log" not in message and "vlm_judge-server-0.log" in str(excinfo.value.hint)
    assert none_left(marker) == []


def test_a_replica_that_dies_past_its_restarts_fails_the_reward_naming_it(tmp_path: Path) -> None:
    marker = new_marker()
    judge = _judge(fake_server(marker, "--die-after", "1", max_restarts=0), tmp_path, concurrency=1)
    try:
        with pytest.raises(RuntimeFailure, match=r"stopped: it died and server\.max_restarts restarts are used up"):
            judge(IMAGES[:3], PROMPTS[:3], [{}] * 3)
    finally:
        judge.close()
    assert none_left(marker) == []


def test_the_actor_being_killed_takes_its_server_down(tmp_path: Path, small_ray: Any) -> None:
    marker = new_marker()
    judge = _judge(fake_server(marker), tmp_path)
    judge.start()
    assert len(none_left(marker, timeout=0)) == 2
    small_ray.kill(judge.servers.replicas[0].handle.actor)
    assert none_left(marker) == []
    judge.close()
    time.sleep(0)


def test_server_options_round_trip_through_the_resolved_config() -> None:
    """config.resolved.toml holds the server table (and no key: there is none to hold) and reloads to the same."""
    from omni_rl.config import dumps, make_converter, parse_toml_text
    from omni_rl.config.toml import to_toml_value

    (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == "vlm_judge"]
    options = structure_options(spec, {"server": fake_server("m", "--grandchild", replicas=2), "template": "matches"})
    text = dumps({"options": to_toml_value(make_converter().unstructure(options))})
    assert structure_options(spec, parse_toml_text(text)["options"]) == options
    assert "api_key" not in text.replace("api_key_env", "")


def test_one_replica_failing_stops_the_others_without_waiting_for_them(tmp_path: Path, small_ray: Any) -> None:
    """Two replicas: the first to run its command fails at once (a marker file makes exactly one fail), the
    other would take two minutes to be ready. The error is the failed one's, at once, and nothing is left."""
    marker = new_marker()
    wrapper = tmp_path / "one_fails.py"
    wrapper.write_text(
        "import os, sys, time\n"
        "if os.environ.get('FAIL_MARK') and not os.path.exists(os.environ['FAIL_MARK']):\n"
        "    open(os.environ['FAIL_MARK'], 'w').close()\n"
        "    print('OSError: replica out of memory', flush=True); sys.exit(1)\n"
        "time.sleep(120)\n"
    )
    server = fake_server(marker, replicas=2, ready_timeout_s=100)
    server["command"] = [sys.executable, str(wrapper), "{port}"]
    server["env"] = {**server["env"], "FAIL_MARK": str(tmp_path / "failed-once")}
    judge = _judge(server, tmp_path)
    began = time.monotonic()
    with pytest.raises(RuntimeFailure, match="OSError: replica out of memory"):
        judge.start()
    assert time.monotonic() - began < 30
    assert none_left(marker) == []
