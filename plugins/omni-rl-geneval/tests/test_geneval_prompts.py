"""The shipped prompt set (553 prompts, GenEval's tag counts, its templates) and the training prompt generator
(deterministic per seed, GenEval metadata, disjoint from the evaluation set)."""

from __future__ import annotations

import collections
import json
from pathlib import Path

from omni_rl_geneval import make_prompts
from omni_rl_geneval.metadata import TAG_COUNTS, check_metadata, class_names, evaluation_prompts, prompt_of

from omni_rl.data import read_prompt_source


def test_the_553_prompts_load_with_the_published_tag_counts() -> None:
    records = evaluation_prompts()
    assert len(records) == 553 and len(class_names()) == 80
    assert collections.Counter(r.metadata["tag"] for r in records) == TAG_COUNTS
    for record in records:
        assert check_metadata(record.metadata) is None, record
        assert prompt_of(record.metadata) == record.prompt  # the templates regenerate every official prompt


def test_the_set_loads_as_a_jsonl_prompt_source_with_its_metadata() -> None:
    records = read_prompt_source("package:omni_rl_geneval:data/evaluation_metadata.jsonl", config_path="$.data.val")
    assert len(records) == 553 and records[0].metadata == {
        "tag": "single_object",
        "include": [{"class": "bench", "count": 1}],
    }


def test_check_metadata_names_what_is_wrong() -> None:
    assert "tag" in (check_metadata({"include": []}) or "")
    assert "class" in (check_metadata({"tag": "single_object", "include": [{"class": "unicorn", "count": 1}]}) or "")
    bad_position = {"tag": "position", "include": [{"class": "cat", "count": 1, "position": ["left of", 0]}]}
    assert "earlier clause" in (check_metadata(bad_position) or "")


def test_generated_training_prompts_are_disjoint_from_the_evaluation_set(tmp_path: Path) -> None:
    out = tmp_path / "train.jsonl"
    assert make_prompts.main(["--seed", "3", "--n", "3000", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    prompts = [row["prompt"] for row in rows]
    assert len(prompts) == 3000 == len(set(prompts))
    assert not set(prompts) & {r.prompt for r in evaluation_prompts()}
    tags = collections.Counter(row["tag"] for row in rows)
    assert set(tags) == set(TAG_COUNTS) - {"single_object"}
    # 80 classes x 3 counts = 240 counting prompts, 80 of them in the evaluation set: the rest saturate first
    assert 100 < tags.pop("counting") <= 160 and min(tags.values()) > 300
    for row in rows:
        metadata = {k: v for k, v in row.items() if k != "prompt"}
        assert check_metadata(metadata) is None and prompt_of(metadata) == row["prompt"]
    assert make_prompts.generate(3, 50) == rows[:50]  # a pure function of the seed
    assert make_prompts.generate(4, 50) != rows[:50]
