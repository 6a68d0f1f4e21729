"""A CPU run of the small tiny-SD3 Flow-GRPO example with ``[log] profile_steps`` and both ``"auto"`` batch sizes:
the profiler trace of the listed step lands in the run directory as Chrome/Perfetto JSON with events from the
step's rollout and update, no other step is traced, and the sizes "auto" resolved to (the whole batch on the
CPU) are in every step's metrics and printed once."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from omni_rl.cli import main
from omni_rl.engine.profiling import trace_path


@pytest.fixture(scope="module")
def run(small_jpeg_args: Callable[..., list[str]], ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("profile") / "run"
    args = small_jpeg_args(
        out,
        "log.profile_steps=[2]",
        'rollout.options.batch_size="auto"',
        'optim.micro_batch="auto"',
        "run.save_every=0",
    )
    assert main(args) == 0
    return out


def test_the_listed_step_is_traced_as_chrome_json(run: Path) -> None:
    out = run
    path = trace_path(out, 2, "rank0")
    assert path.is_file()
    trace = json.loads(path.read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    names = {event.get("name", "") for event in events}
    assert len(events) > 100
    assert any("linear" in name or "addmm" in name or "matmul" in name for name in names)
    assert sorted(p.name for p in (out / "profile").iterdir()) == ["step_2.rank0.json"]  # step 1 not traced


def test_auto_sizes_are_in_the_metrics(run: Path) -> None:
    out = run
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["rollout/batch_size"] for row in rows] == [8.0, 8.0]  # 2 prompts x 4 images, one worker
    assert [row["actor/micro_batch"] for row in rows] == [4.0, 4.0]  # capped at [optim] mini_batch = 4
