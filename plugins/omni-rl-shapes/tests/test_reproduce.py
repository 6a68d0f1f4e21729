"""``python -m omni_rl_shapes.pretraining.reproduce``: the shipped pipelines' stages read back from their records,
replayed with one command into a work directory, and a replay of a replay gives the same weights."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import omni_rl_shapes
from omni_rl_shapes.evaluate import RECORD_FILE
from omni_rl_shapes.pretraining.reproduce import main, stages_of


def _record(arch: str) -> dict:
    return json.loads((omni_rl_shapes.pretrained_path(arch) / RECORD_FILE).read_text())


def _value(args: tuple[str, ...], option: str) -> str | None:
    return args[args.index(option) + 1] if option in args else None


@pytest.mark.parametrize("arch", ["sd3", "qwen_image"])
def test_the_shipped_records_replay_stage_by_stage_into_the_work_directory(arch: str, tmp_path: Path) -> None:
    stages = stages_of(_record(arch))
    assert len(stages) >= 4 and [s.index for s in stages] == list(range(1, len(stages) + 1))
    for stage in stages:
        argv = stage.argv(tmp_path)
        assert not {"--out", "--samples-dir", "--init-from"} & set(stage.args)  # the recorded run's paths are gone
        assert _value(tuple(argv), "--out") == str(tmp_path / f"stage{stage.index}")
        expected_input = None if stage.index == 1 else str(tmp_path / f"stage{stage.index - 1}")
        assert _value(tuple(argv), "--init-from") == expected_input
        assert argv.count("--max-minutes") == 1 and float(_value(tuple(argv), "--max-minutes")) >= 60
        assert ("--arch" in stage.args) == (arch == "qwen_image")
    # the last stage is the shipped one: two strays for the Qwen-Image model, saved in float16
    if arch == "qwen_image":
        assert _value(stages[-1].args, "--strays") == "2" and _value(stages[-1].args, "--save-dtype") == "float16"


def test_a_stage_cut_by_the_clock_replays_exactly_the_steps_it_trained() -> None:
    # the Qwen-Image model's stage 1 was capped at 20 minutes and stopped at step 1829 of 3000
    first = stages_of(_record("qwen_image"))[0]
    assert first.stopped_by_time and first.steps_trained == 1829
    assert _value(first.args, "--steps") == "1829" and first.args.count("--steps") == 1
    # SD3's stage 1 stopped by the band rule (deterministic): replayed as recorded
    sd3_first = stages_of(_record("sd3"))[0]
    assert not sd3_first.stopped_by_time and "--steps" not in sd3_first.args


def test_a_clock_cut_cosine_stage_cannot_be_replayed_exactly() -> None:
    record = {
        "command": "python -m omni_rl_shapes.pretraining.pretrain --steps 1000 --cosine-decay --max-minutes 5 --out /x",
        "transformer": {"max_steps": 1000, "steps": 400},
        "target_band": [0.95, 1.0],
        "evals": [{"step": 200, "score": 0.4}, {"step": 400, "score": 0.5}],
    }
    with pytest.raises(ValueError, match="stage 1 was cut by --max-minutes with --cosine-decay"):
        stages_of(record)


def test_a_stage_recorded_before_the_module_moved_replays_as_one_recorded_now() -> None:
    """The shipped records say ``python -m omni_rl_shapes.pretrain`` (the module's path before
    ``omni_rl_shapes.pretraining``): read the same as today's, run with the module where it is now."""
    old = {
        "command": "python -m omni_rl_shapes.pretrain --seed 1 --out /x",
        "transformer": {"max_steps": 2, "steps": 2},
    }
    now = {**old, "command": "python -m omni_rl_shapes.pretraining.pretrain --seed 1 --out /x"}
    assert stages_of(old)[0].args == stages_of(now)[0].args
    assert stages_of(old)[0].args[:2] == ("--seed", "1") and "--out" not in stages_of(old)[0].args
    with pytest.raises(ValueError, match="stage 1 of the record has no pretrain command"):
        stages_of({**old, "command": "python -m omni_rl_shapes.pretrainer --seed 1"})


def test_a_file_that_is_not_a_pretraining_record_is_named_not_a_traceback(tmp_path: Path) -> None:
    for name, text in (("broken.json", "{not json"), ("other.json", '{"command": "python train.py"}')):
        (tmp_path / name).write_text(text)
        with pytest.raises(SystemExit, match=f"reproduce: {tmp_path / name} is not a pretraining record"):
            main(["--record", str(tmp_path / name), "--work", str(tmp_path / "work"), "--dry-run"])
    with pytest.raises(SystemExit, match="reproduce: no pretraining record at"):
        main(["--record", str(tmp_path / "missing"), "--work", str(tmp_path / "work")])


def test_dry_run_prints_every_stage_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--arch", "qwen_image", "--work", str(tmp_path / "work"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count("-m omni_rl_shapes.pretraining.pretrain") == len(stages_of(_record("qwen_image")))
    assert "stage 1 (recorded: cut by --max-minutes at step 1829)" in out
    assert not (tmp_path / "work").exists()


@pytest.mark.slow  # over 45 s in the default suite; `nox -s integration` / `pytest -m slow` run it
def test_replaying_a_two_stage_record_twice_gives_the_same_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two tiny SD3 stages (from random weights, then strays), replayed from their record into a second work
    directory: every stage runs in its own process, and stage 2's weights come out byte for byte the same."""
    tiny = "--steps 2 --vae-steps 2 --images-per-prompt 1 --eval-from 2 --eval-every 2 --target-low 0 --target-high 1"
    prefix = "python -m omni_rl_shapes.pretraining.pretrain"
    first = {"command": f"{prefix} --seed 5 {tiny} --out /gone/a", "transformer": {"max_steps": 2, "steps": 2}}
    record = {
        "command": f"{prefix} --init-from /gone/a --stray-rate 0.5 --strays 2 --seed 6 {tiny} --out /gone/b",
        "transformer": {"max_steps": 2, "steps": 2},
        "init_from": first,
    }
    source = tmp_path / "record.json"
    source.write_text(json.dumps(record))
    assert main(["--record", str(source), "--work", str(tmp_path / "a")]) == 0
    made = json.loads((tmp_path / "a" / "stage2" / RECORD_FILE).read_text())
    assert made["init_from"]["path"] == str(tmp_path / "a" / "stage1") and made["strays"] == 2
    # the replay's own record replays stage 2 to the same weights; a finished stage (stage 1, copied) is kept
    shutil.copytree(tmp_path / "a" / "stage1", tmp_path / "b" / "stage1")
    before = (tmp_path / "b" / "stage1" / RECORD_FILE).stat().st_mtime_ns
    assert main(["--record", str(tmp_path / "a" / "stage2"), "--work", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b" / "stage1" / RECORD_FILE).stat().st_mtime_ns == before
    weights = "transformer/diffusion_pytorch_model.safetensors"
    assert (tmp_path / "a" / "stage2" / weights).read_bytes() == (tmp_path / "b" / "stage2" / weights).read_bytes()
    assert "val: reproduced" in capsys.readouterr().out
