"""A shortened `nox -s convergence`: the Quickstart config on the shipped shapes model for a few steps, then the
benchmark's own summary and report code on its metrics. Keeps the Quickstart and the convergence table working
without spending the ten minutes the real measurement takes."""

from __future__ import annotations

import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

from omni_rl.cli import main
from omni_rl.reporting.metrics_reader import read_metrics
from omni_rl.testing.runs import set_args

ROOT = Path(__file__).parents[2]
QUICKSTART = ROOT / "docs" / "examples" / "quickstart.toml"


def _convergence_module(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # as `python benchmarks/convergence.py` has it
    spec = importlib.util.spec_from_file_location("omni_rl_convergence", ROOT / "benchmarks" / "convergence.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def quickstart_run(tmp_path_factory: pytest.TempPathFactory, ray_cluster: None) -> Path:
    out = tmp_path_factory.mktemp("quickstart") / "run"
    code = main(
        [
            "run",
            str(QUICKSTART),
            "--set",
            f"run.output_dir={out}",
            "--set",
            "run.steps=2",
            "--set",
            "run.eval_every=1",
            "--set",
            "data.val_prompts=4",
            "--set",
            "data.prompts_per_step=2",
            "--set",
            "rollout.options.group_size=4",
        ]
    )
    assert code == 0
    return out


def test_quickstart_writes_what_the_readme_promises(quickstart_run: Path) -> None:
    rows = [json.loads(line) for line in (quickstart_run / "metrics.jsonl").read_text().splitlines()]
    val_steps = [row["step"] for row in rows if "val/reward/mean" in row]
    assert val_steps == [0, 1, 2]
    assert all(0.0 <= row["reward/mean"] <= 1.0 for row in rows if "reward/mean" in row)
    for key in ("reward/shapes/color", "reward/shapes/count", "reward/shapes/shape", "reward/shapes/position"):
        assert key in rows[1]
    assert (quickstart_run / "samples_step_1.png").is_file()
    assert (quickstart_run / "samples_step_2.png").is_file()
    assert (quickstart_run / "reward_curve.png").is_file()


def test_convergence_summary_and_report(quickstart_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    convergence = _convergence_module(monkeypatch)
    summary = convergence.summarize(quickstart_run / "metrics.jsonl")
    assert summary["steps"] == 2
    assert 0.0 <= summary["base"] <= 1.0 and 0.0 <= summary["final"] <= 1.0
    assert summary["best"] >= summary["final"] and summary["best_step"] in (1, 2)
    assert summary["train_s"] > 0
    report = tmp_path / "benchmarks.md"
    report.write_text("# Benchmarks\n\n## Framework overhead\n\nkept\n")
    convergence.write_report(report, {("flow_grpo", 0): summary}, threads=2)
    text = report.read_text()
    assert "## Framework overhead\n\nkept" in text
    assert "| flow_grpo | `docs/examples/quickstart.toml` | 0 |" in text
    assert "2 torch thread(s) per run" in text
    # the comparison (one row per algorithm), then the per-seed table: each row as wide as its header
    headers = [line for line in text.splitlines() if line.startswith("| algorithm")]
    rows = [line for line in text.splitlines() if line.startswith("| flow_grpo")]
    assert len(headers) == len(rows) == 2
    assert [h.count("|") for h in headers] == [r.count("|") for r in rows]
    # a second report replaces the section instead of appending another
    convergence.write_report(report, {("flow_grpo", 0): summary})
    assert report.read_text().count("## Convergence on shapes") == 1
    # a report of one algorithm (`--only`) or seed keeps the other rows, and the sections after it
    text = report.read_text().replace("| flow_grpo | `", "| dpo | `", 1) + "\n## Later\n\nafter\n"
    report.write_text(text)
    convergence.write_report(report, {("flow_grpo", 0): summary, ("flow_grpo", 1): summary})
    text = report.read_text()
    assert "| dpo | `docs/examples/quickstart.toml` | 0 |" in text and "| flow_grpo |" in text
    assert text.index("| flow_grpo | `docs/examples/quickstart.toml` | 1 |") < text.index("| dpo | `")
    gain = summary["best"] - summary["base"]
    assert f"| flow_grpo | 0, 1 | 2 | {summary['base']:.3f} ± 0.000 | {gain:+.3f} ± 0.000 |" in text
    assert summary["images_per_s"] > 0 and f"| {summary['images_per_s']:.2f} |" in text
    assert "\n\n## Later\n\nafter\n" in text


#: The Quickstart's median seconds per training step on the slowest 2-core machine measured, where its whole command
#: ends inside TEN_MINUTES_S with margin (docs/benchmarks.md, issue 34). A machine whose step is slower than this
#: scales the time bound by its own probe instead of failing it; a faster one keeps the ten minutes.
REFERENCE_STEP_S = 5.0
TEN_MINUTES_S = 600.0
#: the probe: the Quickstart's own training step, four of them, nothing else (no evaluation, images or checkpoints)
PROBE_SETS = (
    "run.steps=4",
    "run.eval_every=0",
    "run.eval_before_training=false",
    "run.save_every=0",
    "log.image_every=0",
)


def _quickstart_command(out: Path, *sets: str) -> float:
    """``omni-rl run docs/examples/quickstart.toml`` as README command 1 runs it (its own Ray, in a fresh process);
    its wall-clock seconds."""
    argv = [sys.executable, "-m", "omni_rl.cli", "run", str(QUICKSTART), *set_args([f"run.output_dir={out}", *sets])]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return seconds


@pytest.mark.slow
def test_quickstart_gains_two_tenths_in_ten_minutes(tmp_path: Path) -> None:
    """README command 1 without its install, for the shipped seed: the val reward at least +0.2 over the base at its
    best evaluation and at least +0.15 at its last (issue 21's bars), and the whole command (Ray's start-up,
    training, evaluations, plots) inside ten minutes, scaled by this machine's own step time measured first (issue
    34; docs/benchmarks.md has the five seeds and the wall-clock). Deselected by default (`-m "not slow"`); run with
    `pytest -m slow`."""
    _quickstart_command(tmp_path / "probe", *PROBE_SETS)
    steps = read_metrics(tmp_path / "probe" / "metrics.jsonl")
    step_s = statistics.median(row["perf/step_s"] for row in steps[1:])  # the first step warms up
    bound = TEN_MINUTES_S * max(1.0, step_s / REFERENCE_STEP_S)

    wall = _quickstart_command(tmp_path / "run")
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    val = [row["val/reward/mean"] for row in rows if "val/reward/mean" in row]
    assert max(val[1:]) - val[0] >= 0.2, val
    assert val[-1] - val[0] >= 0.15, val
    assert wall <= bound, f"the Quickstart took {wall:.0f} s; {bound:.0f} s allowed at {step_s:.2f} s a step"
