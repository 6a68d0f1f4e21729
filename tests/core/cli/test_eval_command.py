"""``omni-rl eval`` end to end on toy components and a fake benchmark (no model weights, no Ray), for the findings of
qa-2026-12: an invalid ``--limit`` poisoned the output folder (N5), two evaluations into one folder both "succeeded"
with every row twice (N6), ``--compare A B`` evaluated A before finding B missing (N7), SIGTERM killed an evaluation
silently and a double Ctrl-C printed a traceback (N10), and ``--device`` typos or an ``--out`` under /proc were raw
exceptions (exit 1). Each is now refused before anything is written, with exit 2 and one line naming the option."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
import torch
from core_toys import TOY_CONFIG, ToyModel, ToyPlugin

from omni_rl import BenchmarkSpec, hookimpl
from omni_rl.benchmark import BenchmarkSummary, ImageResult, ImageVerdict, SummaryRow
from omni_rl.cli import main
from omni_rl.config import load_config, write_resolved
from omni_rl.data import PromptRecord
from omni_rl.registry import Registry
from omni_rl.rundir.lock import RunLock
from omni_rl.testing import InlinePlugin, make_registry


class Bright:
    """Correct when the image's mean is above mid-grey; ``stop_after`` raises SIGTERM in that many-th score call."""

    images_per_prompt = 1
    calls = 0
    stop_after: int | None = None

    def prompts(self) -> list[PromptRecord]:
        return [PromptRecord(f"prompt {i}", {"group": "ab"[i % 2]}) for i in range(40)]

    def score(self, images: np.ndarray, records: Sequence[PromptRecord]) -> list[ImageVerdict]:
        Bright.calls += 1
        if Bright.stop_after is not None and Bright.calls >= Bright.stop_after:
            signal.raise_signal(signal.SIGTERM)
        return [ImageVerdict(correct=float(a.mean()) > 127, score=float(a.mean()) / 255, reason="") for a in images]

    def summarize(self, results: Sequence[ImageResult]) -> BenchmarkSummary:
        correct = sum(r.correct for r in results)
        row = SummaryRow(name="all", correct=correct, total=len(results), score=correct / len(results))
        return BenchmarkSummary(
            benchmark="bright",
            rows=(row,),
            overall=row.score,
            images=len(results),
            prompts=len({r.index for r in results}),
            correct_images=row.score,
            correct_prompts=row.score,
            text=f"overall {row.score:.4f}",
        )


class BenchmarkPlugin:
    @hookimpl
    def omni_rl_benchmarks(self) -> list[BenchmarkSpec]:
        return [BenchmarkSpec(name="bright", factory=lambda config, ctx: Bright(), summary="bright images")]


@pytest.fixture
def registry(use_registry: Callable[[Registry], Registry]) -> Registry:
    registry = make_registry(InlinePlugin(ToyPlugin(), "toys", "1"), InlinePlugin(BenchmarkPlugin(), "bench", "1"))
    registry.validate()
    return use_registry(registry)


@pytest.fixture
def run_dir(tmp_path: Path, write_config: Callable[..., Path], registry: Registry) -> Path:
    """A toy run directory with checkpoints of steps 1 and 2 (the LoRA of step 2 moved off zero)."""
    run_dir = tmp_path / "run"
    config = load_config(write_config(TOY_CONFIG), [f"run.output_dir={run_dir}"], registry=registry)
    write_resolved(config, run_dir)
    model = ToyModel(config.components["model"].options)
    model.save_lora(run_dir / "checkpoints" / "step_1")
    with torch.no_grad():
        model.transformer.lora.add_(0.5)
    model.save_lora(run_dir / "checkpoints" / "step_2")
    return run_dir


@pytest.fixture(autouse=True)
def fresh_counts() -> Iterator[None]:
    """The benchmark's call counter and stop, and the signal handlers an interrupted evaluation leaves installed."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    Bright.calls, Bright.stop_after = 0, None
    yield
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def _eval(run_dir: Path, *extra: str) -> list[str]:
    return ["eval", str(run_dir), "--benchmark", "bright", "--device", "cpu", *extra]


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err, err
    return err


def _rows(out: Path) -> list[tuple[int, int]]:
    return [(r["index"], r["sample"]) for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())]


def test_an_invalid_limit_writes_nothing_so_the_corrected_command_runs(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run_dir / "eval" / "bright_step_2"
    for limit in ("0", "-3"):
        assert "--limit must be >= 1, got " + limit in _usage_error(_eval(run_dir, "--limit", limit), capsys)
    assert not out.exists() and Bright.calls == 0
    assert main(_eval(run_dir, "--limit", "4")) == 0
    assert len(_rows(out)) == 4 and "bright: 4/4 prompts scored" in capsys.readouterr().err
    # with an evaluation there, the invalid value is named, not a settings change
    err = _usage_error(_eval(run_dir, "--limit", "0"), capsys)
    assert "--limit must be >= 1" in err and "other settings" not in err


def test_compare_checks_both_steps_before_evaluating_either(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(_eval(run_dir, "--compare", "1", "99", "--limit", "2"), capsys)
    assert "--compare: " in err and "has no checkpoint of step 99" in err
    assert "hint: available steps: 1, 2; --compare takes two of them" in err and "--step" not in err
    assert Bright.calls == 0 and not (run_dir / "eval").exists()
    assert main(_eval(run_dir, "--compare", "1", "2", "--limit", "2")) == 0, capsys.readouterr().err
    assert (run_dir / "eval" / "bright_step_1_vs_2" / "comparison.csv").is_file()


def test_an_output_folder_in_use_is_refused(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two evaluations into one --out both exited 0 with every results row twice; the second is now refused."""
    out = tmp_path / "ev"
    with RunLock(out, where="--out", what="omni-rl process"):  # another evaluation holding it
        err = _usage_error(_eval(run_dir, "--out", str(out), "--limit", "2"), capsys)
    assert f"output directory {str(out)!r} is in use by another omni-rl process (pid " in err and "@ --out" in err
    assert not (out / "results.jsonl").exists() and Bright.calls == 0
    assert main(_eval(run_dir, "--out", str(out), "--limit", "2")) == 0
    assert main(_eval(run_dir, "--out", str(out), "--limit", "2")) == 0  # resumes: nothing sampled twice
    assert sorted(_rows(out)) == [(0, 0), (20, 0)]


@pytest.mark.parametrize(
    ("device", "message"),
    [("cuda/bogus", "is not a device name"), ("cpux", "is not a device name"), ("meta", "on the CPU or a CUDA GPU")],
)
def test_device_typos_are_usage_errors(
    run_dir: Path, device: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _usage_error(["eval", str(run_dir), "--benchmark", "bright", "--device", device], capsys)
    assert f"--device {device!r}" in err and message in err and "hint: use auto" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is visible")
def test_cuda_without_a_gpu_is_a_usage_error(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(["eval", str(run_dir), "--benchmark", "bright", "--device", "cuda:0"], capsys)
    assert "--device 'cuda:0': no CUDA GPU is visible" in err and "--device cpu" in err


def test_seed_out_of_range_and_an_out_under_proc_are_usage_errors(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "--seed must be an integer between 0 and" in _usage_error(_eval(run_dir, "--seed", "-1"), capsys)
    if Path("/proc/self").is_dir():
        err = _usage_error(_eval(run_dir, "--out", "/proc/qa_eval"), capsys)
        assert "cannot create directories in '/proc'" in err and "@ --out" in err


def test_sigterm_stops_keeps_the_scored_prompts_and_prints_the_resume_command(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    Bright.stop_after = 2  # 16 prompts a call: the signal arrives while the second call is scored
    assert main(_eval(run_dir, "--limit", "40")) == 143
    err = capsys.readouterr().err
    assert "error: interrupted (SIGTERM); the images scored so far are kept" in err and "Traceback" not in err
    resume = f"omni-rl eval {run_dir} --benchmark bright --step 2 --limit 40 --device cpu"
    assert f"hint: resume with: {resume}" in err
    out = run_dir / "eval" / "bright_step_2"
    assert len(_rows(out)) == 16
    Bright.stop_after = None
    assert main(resume.split()[1:]) == 0
    assert sorted(_rows(out)) == [(i, 0) for i in range(40)]  # the rest, none twice


SECOND_SIGNAL = """
import atexit, signal, sys
from rich.console import Console
from omni_rl.errors import Interrupted
from omni_rl.evaluation.interrupts import StopOnSignal

atexit.register(lambda: signal.raise_signal(signal.SIGINT))  # the second Ctrl-C, while the first one exits
try:
    with StopOnSignal(Console(stderr=True), lambda: "omni-rl eval RUN --benchmark b --step 2"):
        signal.raise_signal(signal.SIGINT)
except Interrupted as exc:
    print(f"{exc.exit_code}: {exc.hint}", file=sys.stderr)
    sys.exit(exc.exit_code)
"""


def test_a_second_ctrl_c_while_exiting_exits_without_a_traceback() -> None:
    done = subprocess.run([sys.executable, "-c", SECOND_SIGNAL], capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr
    assert "130: resume with: omni-rl eval RUN --benchmark b --step 2" in done.stderr
    assert "second Ctrl-C: exiting now; resume with: omni-rl eval RUN" in done.stderr
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr, done.stderr
