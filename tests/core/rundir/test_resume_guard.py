"""``omni_rl.rundir.resume_guard``: a resume that changes what the checkpoint fixes is named, option and both values."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_rl.errors import ConfigError
from omni_rl.rundir.resume_guard import changed_fixed_options, check_fixed_options, fixed_option_problems

RUN = {
    "model": {"name": "sd3", "options": {"lora_rank": 8, "lora_alpha": 8.0, "lora_target_modules": ["a", "b"]}},
    "optim": {"lr": 0.01},
}


def _with(**options: object) -> dict:
    return {**RUN, "model": {"name": "sd3", "options": {**RUN["model"]["options"], **options}}}


def _checkpoint(tmp_path: Path, saved: str) -> Path:
    (tmp_path / "checkpoints" / "step_2").mkdir(parents=True)
    (tmp_path / "config.resolved.toml").write_text(saved)
    return tmp_path / "checkpoints" / "step_2"


def test_the_same_fixed_options_pass_whatever_else_changes() -> None:
    assert changed_fixed_options(RUN, {**RUN, "optim": {"lr": 0.5}}) == []
    assert changed_fixed_options(RUN, _with(lora_alpha=8)) == []  # 8 and 8.0 are one value


def test_each_changed_option_is_named_with_both_values() -> None:
    assert changed_fixed_options(RUN, _with(lora_rank=16, lora_target_modules=["a"])) == [
        ("model.options.lora_rank", 8, 16),
        ("model.options.lora_target_modules", ["a", "b"], ["a"]),
    ]


def test_another_model_is_named_alone() -> None:
    other = {"model": {"name": "flux", "options": {"lora_rank": 16}}}
    assert changed_fixed_options(RUN, other) == [("model.name", "sd3", "flux")]


def test_the_problem_line_reads_the_checkpoints_run(tmp_path: Path) -> None:
    checkpoint = _checkpoint(
        tmp_path,
        '[model]\nname = "sd3"\n[model.options]\nlora_rank = 8\nlora_alpha = 8.0\nlora_target_modules = ["a", "b"]\n',
    )
    (problem,) = fixed_option_problems(_with(lora_rank=16), checkpoint)
    assert "model.options.lora_rank is 16 here but 8 in the run that wrote the checkpoint" in problem
    assert problem.endswith("@ $.model.options.lora_rank")
    with pytest.raises(ConfigError) as info:
        check_fixed_options(_with(lora_rank=16), checkpoint)
    assert info.value.exit_code == 2 and "nothing was changed" in (info.value.hint or "")
    check_fixed_options(RUN, checkpoint)  # the run's own values: no error


def test_a_checkpoint_without_its_runs_config_is_not_judged(tmp_path: Path) -> None:
    (tmp_path / "checkpoints" / "step_2").mkdir(parents=True)
    assert fixed_option_problems(_with(lora_rank=16), tmp_path / "checkpoints" / "step_2") == []
