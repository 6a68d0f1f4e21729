"""The shapes edit tasks: the split rule (disjoint by source composition and by instruction), the shipped files
(up to date with the generator, small, every source PNG the rendered source), and the generator's command."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from omni_rl_shapes.edit.make_tasks import SEED, TASK_DIR, build, main
from omni_rl_shapes.edit.splits import SPLITS, all_compositions, all_instructions, assign
from omni_rl_shapes.edit.tasks import EDIT_KINDS, placed_from
from omni_rl_shapes.render import draw
from PIL import Image


def _rows(split: str) -> list[dict]:
    return [json.loads(line) for line in (TASK_DIR / f"{split}.jsonl").read_text().splitlines()]


def _composition(row: dict) -> frozenset:
    return frozenset((o["color"], o["shape"]) for o in row["source_objects"])


def test_the_assignment_is_a_partition_and_deterministic() -> None:
    compositions, instructions = assign(SEED)
    assert sorted(c for s in SPLITS for c in compositions[s]) == all_compositions()
    for kind in EDIT_KINDS:
        parts = [instructions[s][kind] for s in SPLITS]
        assert all(parts), kind  # every split has instructions of every kind
        assert set().union(*parts) == set(all_instructions(kind))
        assert sum(map(len, parts)) == len(all_instructions(kind))
    assert assign(SEED) == assign(SEED) and assign(SEED) != assign(SEED + 1)


def test_shipped_splits_are_disjoint_by_scene_and_instruction() -> None:
    rows = {s: _rows(s) for s in SPLITS}
    assert [len(rows[s]) for s in SPLITS] == [300, 48, 48]
    for split in SPLITS:
        assert {r["kind"] for r in rows[split]} == set(EDIT_KINDS)
        counts = {k: sum(r["kind"] == k for r in rows[split]) for k in EDIT_KINDS}
        assert len(set(counts.values())) == 1, counts  # balanced
    for i, a in enumerate(SPLITS):
        for b in SPLITS[i + 1 :]:
            assert not {_composition(r) for r in rows[a]} & {_composition(r) for r in rows[b]}, (a, b)
            assert not {r["prompt"] for r in rows[a]} & {r["prompt"] for r in rows[b]}, (a, b)


def test_shipped_pngs_are_the_rendered_scenes_and_small() -> None:
    total = sum(p.stat().st_size for p in TASK_DIR.rglob("*") if p.is_file())
    assert total < 3_000_000
    for row in _rows("val"):
        source = np.asarray(Image.open(TASK_DIR / row["image"]).convert("RGB"))
        target = np.asarray(Image.open(TASK_DIR / row["target_image"]).convert("RGB"))
        assert source.shape == (row["size"], row["size"], 3)
        np.testing.assert_array_equal(source, draw([placed_from(o) for o in row["source_objects"]], row["size"]))
        np.testing.assert_array_equal(target, draw([placed_from(o) for o in row["target_objects"]], row["size"]))
        untouched = [row["target_objects"][k] for k in row["untouched"]]
        assert all(o in row["source_objects"] for o in untouched)


def test_shipped_files_match_the_generator() -> None:
    assert main(["--check"]) == 0


def test_the_command_is_reproducible_and_check_catches_a_change(tmp_path: Path, capsys) -> None:
    args = ["--out", str(tmp_path), "--seed", "3", "--size", "48", "--train", "2", "--val", "1", "--test", "1"]
    assert main(args) == 0
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and {r["size"] for r in rows} == {48}
    assert all((tmp_path / r["image"]).is_file() for r in rows)
    assert main([*args, "--check"]) == 0
    (tmp_path / "val.jsonl").write_text("")
    assert main([*args, "--check"]) == 1
    assert "stale edit task files" in capsys.readouterr().err
    other = build(4, 48, {"train": 2, "val": 1, "test": 1})
    assert other["train.jsonl"] != (tmp_path / "train.jsonl").read_bytes()


def test_bad_arguments_are_one_line(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--size", "8"])
    assert "--size must be at least 16" in capsys.readouterr().err


def test_the_shipped_splits_read_as_edit_prompt_sources() -> None:
    """``[data] train = 'package:omni_rl_shapes:edit/tasks/train.jsonl'``: every row has its source image, and the
    target metadata reaches the reward as the record's metadata."""
    from omni_rl.data import read_prompt_source

    records = read_prompt_source("package:omni_rl_shapes:edit/tasks/train.jsonl", config_path="$.data.train")
    assert len(records) == 300 and all(len(r.images) == 1 for r in records)
    assert {"kind", "edit", "target_objects", "untouched", "fixed"} <= set(records[0].metadata)
    assert "image" not in records[0].metadata
