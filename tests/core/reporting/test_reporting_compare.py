"""The pieces of ``omni-rl compare`` and the run summary: labels from config differences, the EMA, the table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from omni_rl.cli import main
from omni_rl.reporting.compare import difference_labels, flatten
from omni_rl.reporting.run_summary import format_reward, summarize_run
from omni_rl.reporting.smoothing import ema


def test_ema_is_debiased_by_hand() -> None:
    # factor 0.5: a1 = 0.5*2 / 0.5 = 2; a2 = (0.25*2 + 0.5*4) / 0.75 = 3.333...
    assert ema([2.0, 4.0], 0.5) == pytest.approx([2.0, 10 / 3])
    assert ema([1.0, 1.0, 1.0]) == pytest.approx([1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        ema([1.0], 1.0)


def test_flatten_indexes_arrays_of_tables() -> None:
    flat = flatten({"run": {"seed": 1}, "reward": [{"name": "a", "weight": 1.0}, {"name": "b"}]})
    assert flat == {"run.seed": 1, "reward.0.name": "a", "reward.0.weight": 1.0, "reward.1.name": "b"}


def test_labels_are_the_differences_and_ignore_output_dirs() -> None:
    a = {"run": {"seed": 0, "output_dir": "x"}, "algorithm": {"name": "flow_grpo"}}
    b = {"run": {"seed": 0, "output_dir": "y"}, "algorithm": {"name": "dance_grpo"}}
    assert difference_labels([a, b], ["x", "y"]) == ["algorithm.name=flow_grpo", "algorithm.name=dance_grpo"]
    # nothing differs: the directory names
    assert difference_labels([a, a], ["x", "y"]) == ["x", "y"]


def _run(path: Path, rows: list[dict], seed: int) -> Path:
    path.mkdir()
    (path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"step": 9, "torn')
    (path / "config.resolved.toml").write_text(f"[run]\nseed = {seed}\noutput_dir = '{path}'\n")
    (path / "checkpoints" / "step_2").mkdir(parents=True)
    (path / "checkpoints" / "step_10").mkdir(parents=True)
    return path


def test_the_summary_reads_base_best_final_and_sub_scores(tmp_path: Path) -> None:
    rows = [
        {"step": 0, "val/reward/mean": 0.25, "val/reward/shapes/count": 0.5, "val/reward/std": 0.1},
        {"step": 1, "reward/mean": 0.2, "perf/step_s": 2.0, "perf/images_per_s": 4.0},
        {"step": 2, "reward/mean": 0.3, "perf/step_s": 3.0, "perf/images_per_s": 6.0, "val/reward/mean": 0.5},
        {"step": 3, "reward/mean": 0.3, "perf/step_s": 3.0, "val/reward/mean": 0.4, "val/reward/shapes/count": 0.7},
    ]
    summary = summarize_run(_run(tmp_path / "r", rows, 0))
    assert (summary.total.base, summary.total.best, summary.total.best_step, summary.total.final) == (
        0.25,
        0.5,
        2,
        0.4,
    )
    assert list(summary.sub_scores) == ["shapes/count"]  # the std is not a score
    assert summary.sub_scores["shapes/count"].final == 0.7
    assert summary.train_s == 8.0 and summary.images_per_s == 5.0 and summary.steps == 3
    assert summary.last_checkpoint == tmp_path / "r" / "checkpoints" / "step_10"  # by step number, not name
    assert summary.export_command is not None and "--step 10" in summary.export_command
    assert format_reward(0.5) == "0.500" and format_reward(None) == "—"


def test_compare_refuses_a_directory_that_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(tmp_path / "empty"), "--out", str(tmp_path / "o.png")]) == 2
    err = capsys.readouterr().err
    assert "is not an omni-rl run directory" in err
    assert not (tmp_path / "o.png").exists()


def test_compare_writes_the_overlay_for_written_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"step": 0, "val/reward/mean": 0.2}, {"step": 1, "reward/mean": 0.1, "perf/step_s": 1.0}]
    a, b = _run(tmp_path / "a", rows, 0), _run(tmp_path / "b", rows, 1)
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "o.png")]) == 0
    assert (tmp_path / "o.png").is_file()
    out = capsys.readouterr().out
    assert "run.seed=0" in out and "run.seed=1" in out
