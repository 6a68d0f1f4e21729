"""Condition images in prompt rows (omni_rl.data_images): read, checked and loaded by the stated rule; refused with
the file, the row and the field; counted against the model's ``condition_images`` before training."""

from __future__ import annotations

import io
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image

from omni_rl.config.prompts import prompt_source_problems
from omni_rl.data import read_prompt_source
from omni_rl.data_images import load_condition
from omni_rl.errors import ConfigError
from omni_rl.reporting.image_grids import beside_sources
from omni_rl.rewards.frames import FrameRewards, call_reward


def _png(path: Path, size: tuple[int, int] = (24, 16), colour: tuple[int, int, int] = (200, 10, 30)) -> Path:
    Image.new("RGB", size, colour).save(path)
    return path


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_a_row_image_is_a_path_relative_to_the_prompt_file_and_leaves_the_metadata(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    _png(tmp_path / "src" / "a.png")
    _png(tmp_path / "src" / "b.png", colour=(0, 0, 255))
    source = _jsonl(
        tmp_path / "edits.jsonl",
        [
            {"prompt": "make it blue", "image": "src/a.png", "tag": "recolor"},
            {"prompt": "combine", "images": ["src/a.png", "src/b.png"]},
            {"prompt": "text only"},
        ],
    )
    records = read_prompt_source(str(source), config_path="$.data.train")
    assert [len(r.images) for r in records] == [1, 2, 0]
    assert records[0].metadata == {"tag": "recolor"}  # the image field is not metadata
    first = load_condition(records[0].images[0])
    assert first.dtype == np.uint8 and first.shape == (16, 24, 3) and tuple(first[0, 0]) == (200, 10, 30)
    assert tuple(load_condition(records[1].images[1])[0, 0]) == (0, 0, 255)


def test_a_missing_or_broken_image_names_the_file_the_row_and_the_field(tmp_path: Path) -> None:
    missing = _jsonl(tmp_path / "a.jsonl", [{"prompt": "x", "image": "a.png"}, {"prompt": "y", "image": "nope.png"}])
    _png(tmp_path / "a.png")
    with pytest.raises(ConfigError) as exc:
        read_prompt_source(str(missing), config_path="$.data.train")
    assert "a.jsonl:2 field 'image'" in exc.value.message and "nope.png" in exc.value.message
    assert exc.value.message.endswith("@ $.data.train")

    (tmp_path / "notes.png").write_text("not an image")
    broken = _jsonl(tmp_path / "b.jsonl", [{"prompt": "x", "images": ["a.png", "notes.png"]}])
    with pytest.raises(ConfigError) as exc:
        read_prompt_source(str(broken), config_path="$.data.val")
    assert "b.jsonl:1 field 'images'[1]" in exc.value.message and "not a readable image" in exc.value.message

    wrong = _jsonl(tmp_path / "c.jsonl", [{"prompt": "x", "images": "a.png"}])
    with pytest.raises(ConfigError, match="must be a list"):
        read_prompt_source(str(wrong), config_path="$.data.train")


def test_parquet_rows_carry_encoded_image_bytes(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), (1, 2, 3)).save(buffer, format="PNG")
    table = pa.table({"prompt": ["edit it"], "image": [{"bytes": buffer.getvalue(), "path": "x.png"}]})
    pq.write_table(table, tmp_path / "edits.parquet")
    (record,) = read_prompt_source(str(tmp_path / "edits.parquet"), config_path="$.data.train")
    assert record.metadata == {} and tuple(load_condition(record.images[0])[0, 0]) == (1, 2, 3)


def test_large_images_are_downscaled_with_their_aspect_and_small_ones_kept(tmp_path: Path) -> None:
    source = _jsonl(tmp_path / "e.jsonl", [{"prompt": "x", "image": str(_png(tmp_path / "big.png", (400, 100)))}])
    (record,) = read_prompt_source(str(source), config_path="$.data.train")
    assert load_condition(record.images[0], max_pixels=100 * 25).shape == (25, 100, 3)
    assert load_condition(record.images[0], max_pixels=10**6).shape == (100, 400, 3)  # never upscaled


def _config(source: Path, condition_images: tuple[int, int]) -> SimpleNamespace:
    model = SimpleNamespace(name="toy_edit", spec=SimpleNamespace(condition_images=condition_images))
    data = SimpleNamespace(train=str(source), val="")
    return SimpleNamespace(
        data=data, run=SimpleNamespace(eval_every=0, eval_before_training=False), components={"model": model}
    )


def test_rows_are_counted_against_the_models_condition_images(tmp_path: Path) -> None:
    _png(tmp_path / "a.png")
    edits = _jsonl(tmp_path / "edits.jsonl", [{"prompt": "x", "image": "a.png"}, {"prompt": "no source"}])
    problems, hints = prompt_source_problems(_config(edits, (1, 1)))
    assert problems == [
        "edits.jsonl: row 2 has 0 condition image(s), but model 'toy_edit' takes 1 per prompt (the row's 'image' / "
        "'images' field) @ $.data.train"
    ]
    assert hints
    problems, _ = prompt_source_problems(_config(edits, (0, 0)))
    assert "model 'toy_edit' generates from text only" in problems[0] and "edits.jsonl:1" in problems[0]
    plain = _jsonl(tmp_path / "plain.jsonl", [{"prompt": "x"}])
    assert prompt_source_problems(_config(plain, (0, 1)))[0] == []


class _Reads:
    reads_conditions = True

    def __call__(self, images, prompts, metadata, *, conditions):
        return np.asarray([float(len(c)) + float(np.asarray(c[0]).mean() if c else 0.0) for c in conditions])


def test_a_reward_that_reads_conditions_gets_them_aligned_with_the_images() -> None:
    images = np.zeros((2, 4, 4, 3), dtype=np.uint8)
    sources = [(np.full((2, 2, 3), 10, np.uint8),), (np.full((2, 2, 3), 20, np.uint8),)]
    assert call_reward(_Reads(), images, ["a", "b"], [{}, {}], sources).tolist() == [11.0, 21.0]
    assert call_reward(_Reads(), images, ["a", "b"], [{}, {}], None).tolist() == [0.0, 0.0]  # text-only batch
    plain = lambda images, prompts, metadata: np.ones(len(prompts))  # noqa: E731 - a reward that reads no sources
    assert call_reward(plain, images, ["a", "b"], [{}, {}], sources).tolist() == [1.0, 1.0]
    video = np.zeros((2, 3, 4, 4, 3), dtype=np.uint8)  # frame by frame: each frame gets its video's sources
    assert FrameRewards(_Reads())(video, ["a", "b"], [{}, {}], sources).scores.tolist() == [11.0, 21.0]


def test_grids_show_each_source_left_of_its_result() -> None:
    out = np.full((2, 8, 8, 3), 255, dtype=np.uint8)
    sources = [(np.full((4, 8, 3), 7, np.uint8),), ()]
    cells = beside_sources(out, sources)
    assert cells.shape == (2, 8, 16, 3)
    assert (cells[0, 2:6, :8] == 7).all() and (cells[0, 0, :8] == 0).all()  # letterboxed into 8 x 8
    assert (cells[1, :, :8] == 0).all() and (cells[:, :, 8:] == 255).all()
    video = np.full((1, 3, 8, 8, 3), 255, dtype=np.uint8)
    assert beside_sources(video, sources[:1]).shape == (1, 3, 8, 16, 3)
    assert beside_sources(out, [(), ()]) is out


EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


@pytest.mark.parametrize("case", ["missing", "not_an_image", "no_image"])
def test_a_broken_edit_row_stops_run_and_check_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    """Issue 49's "Done when": a broken image path, a non-image file, or an image-free row for an editing model
    stops `omni-rl run` (and `check`) before anything starts, exit 2, one line naming the file, the row, the field."""
    pytest.importorskip("omni_rl_flux.kontext")
    from omni_rl.cli import main

    _png(tmp_path / "ok.png", (32, 32))
    (tmp_path / "notes.png").write_text("not an image")
    rows = {
        "missing": [{"prompt": "a", "image": "ok.png"}, {"prompt": "b", "image": "gone.png"}],
        "not_an_image": [{"prompt": "a", "image": "notes.png"}],
        "no_image": [{"prompt": "a", "image": "ok.png"}, {"prompt": "b"}],
    }[case]
    prompts = _jsonl(tmp_path / "edits.jsonl", rows)
    sets = [f"data.train={prompts}", f"run.output_dir={tmp_path / 'run'}", f"model.options.path={tmp_path / 'm'}"]
    args = [a for s in sets for a in ("--set", s)]
    for command in ("run", "check"):
        assert main([command, str(EXAMPLES / "kontext_tiny.toml"), *args]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and "edits.jsonl" in err
        expected = {
            "missing": "edits.jsonl:2 field 'image'",
            "not_an_image": "not a readable image",
            "no_image": "row 2",
        }
        assert expected[case] in err, err
    assert not (tmp_path / "run").exists()  # nothing was started or written
