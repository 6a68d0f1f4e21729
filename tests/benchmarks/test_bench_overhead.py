"""The overhead benchmark (`nox -s bench`, `nox -s bench_gpu`) without its ten minutes: the report writer keeps
the other sections and computes the 10% verdict itself, the bare loop is the same compute as the framework (same
latents, same gradient), and the GPU rows refuse clearly where there is no CUDA device."""

from __future__ import annotations

import copy
import importlib
from pathlib import Path
from types import ModuleType

import pytest
import torch

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"

OTHER_SECTIONS = """# Benchmarks

## Framework overhead (`nox -s bench`)

old cpu table

## One GPU: SD3.5-Medium-sized model (`nox -s bench_gpu`)

Not measured yet.

## Convergence on shapes (`nox -s convergence`)

| algorithm | base val |
|---|---|
| flow_grpo | 0.245 |
Prose mentioning ## Framework overhead mid-line is not a heading.
"""


def _load(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # as `python benchmarks/overhead.py` has it
    return importlib.import_module(name)


@pytest.fixture
def report(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    return _load("overhead_report", monkeypatch)


def _timing(report: ModuleType, label: str, rollout: float, update: float) -> object:
    return report.Timing(
        label=label,
        images=8,
        trained_steps=2,
        rollout_framework_s=rollout,
        rollout_bare_s=1.0,
        update_framework_s=update,
        update_bare_s=2.0,
    )


def test_verdict_is_computed_against_the_target(report: ModuleType) -> None:
    within = report.verdict_lines([_timing(report, "tiny", 1.10, 2.0)])
    assert "every ratio is within the 10% target" in within[0]
    over = report.verdict_lines([_timing(report, "tiny", 1.0, 2.0), _timing(report, "mid", 1.2, 2.3)])
    assert "over the 10% target" in over[0]
    assert "mid rollout 1.200" in over[0] and "mid update 1.150" in over[0] and "tiny" not in over[0]
    noisy = report.verdict_lines([_timing(report, "tiny", 0.9, 2.0)])
    assert "within" in noisy[0] and "noise" in noisy[1]


def test_write_report_replaces_only_its_own_section(report: ModuleType, tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(OTHER_SECTIONS)

    gpu = report.gpu_section([_timing(report, "sd35m", 1.02, 2.1)], ["Measured on a test GPU."])
    report.write_report(doc, gpu)
    text = doc.read_text()
    assert "Not measured yet." not in text and "Measured on a test GPU." in text
    assert "| sd35m | 7.84 |" in text and "every ratio is within the 10% target" in text
    assert "old cpu table" in text and "| flow_grpo | 0.245 |" in text

    scaling = report.Scaling("Scaling: test.", {1: 10.0, 2: 5.0})
    cpu = report.cpu_section([_timing(report, "mid", 1.0, 2.5)], scaling, ["Measured on a test CPU."])
    report.write_report(doc, cpu)
    text = doc.read_text()
    assert "old cpu table" not in text and "over the 10% target" in text and "mid update 1.250" in text
    assert "| 2 | 5.00 | 2.00x |" in text
    assert "Measured on a test GPU." in text and "Prose mentioning ## Framework overhead mid-line" in text
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == [report.CPU_HEADING, report.GPU_HEADING, "## Convergence on shapes (`nox -s convergence`)"]

    with pytest.raises(ValueError, match="not an overhead section"):
        report.write_report(doc, "## Something else\n")


def test_gpu_rows_without_cuda_exit_with_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    overhead = _load("overhead", monkeypatch)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "benchmarks.md"
    with pytest.raises(SystemExit) as exit_info:
        overhead.main(["--device", "cuda", "--out", str(out)])
    message = str(exit_info.value.code)
    assert "no CUDA device" in message and "nox -s bench_gpu" in message and "nox -s bench`" in message
    assert not out.exists()


@pytest.mark.gpu
def test_gpu_rows_on_a_tiny_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    overhead = _load("overhead", monkeypatch)
    reason = overhead.cuda_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "benchmarks.md"
    out.write_text(OTHER_SECTIONS)
    args = ["--device", "cuda", "--sizes", "tiny", "--repeats", "1", "--steps", "3", "--group-size", "2"]
    overhead.main([*args, "--out", str(out), "--cache-dir", str(tmp_path / "cache")])
    text = out.read_text()
    assert torch.cuda.get_device_name() in text and "bfloat16" in text and "Verdict" in text
    assert "old cpu table" in text


@pytest.fixture(scope="module")
def tiny_case(tmp_path_factory: pytest.TempPathFactory) -> object:
    with pytest.MonkeyPatch.context() as monkeypatch:
        case_module = _load("overhead_case", monkeypatch)
        overhead = _load("overhead", monkeypatch)
        path = overhead.build_pipeline("tiny", tmp_path_factory.mktemp("bench"))
        setting = case_module.Setting(group_size=2, steps=3, window=2, batch_size=4, micro_batch=2)
        return case_module, case_module.OverheadCase(path, setting)


def test_bare_loop_is_the_same_compute(tiny_case: tuple[ModuleType, object]) -> None:
    _, case = tiny_case
    latents, images = case.bare_rollout()
    torch.testing.assert_close(latents, case.batch.final_latents, rtol=1e-4, atol=1e-4)
    assert (images.int() - case.batch.images.int()).abs().max() <= 1
    # the bare recompute of old log-probs is the sampler's own: on-policy it returns the rollout's
    torch.testing.assert_close(case._bare_old_log_probs(), case.batch.trajectory.log_probs, rtol=1e-5, atol=1e-5)

    params = [p.detach().clone() for p in case.params]
    state = copy.deepcopy(case.optimizer.state_dict())
    framework_norm = case.framework_update()
    with torch.no_grad():
        for p, saved in zip(case.params, params, strict=True):
            p.copy_(saved)
    case.optimizer.load_state_dict(state)
    bare_norm = case.bare_update()
    assert framework_norm > 0
    assert bare_norm == pytest.approx(framework_norm, rel=1e-4)


def test_measure_times_both_sides(tiny_case: tuple[ModuleType, object], monkeypatch: pytest.MonkeyPatch) -> None:
    case_module, case = tiny_case
    report = _load("overhead_report", monkeypatch)
    timing = case_module.measure(case, "tiny", repeats=1)
    assert timing.images == 4 and timing.trained_steps == 2 and timing.peak_memory_gib is None
    for seconds in (timing.rollout_framework_s, timing.rollout_bare_s, timing.update_framework_s, timing.update_bare_s):
        assert seconds > 0
    assert (
        timing.diffusers_rollout_s > 0
        and timing.vs_diffusers == timing.diffusers_rollout_s / timing.rollout_framework_s
    )
    section = report.cpu_section([timing], None, [case.setting.describe()])
    assert "old log-probs reused from the rollout, not recomputed" in section and "Verdict" in section
    assert f"| {timing.diffusers_rollout_s:.3f} | {timing.vs_diffusers:.3f} |" in section
