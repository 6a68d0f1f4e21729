"""Prompt sources: .parquet files (prompt column, metadata columns with their Python types) and the errors a user
gets for a file the reader cannot take."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from omni_rl.data import read_prompt_source
from omni_rl.errors import ConfigError


def _write_parquet(path: Path, columns: dict[str, list]) -> Path:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    pq.write_table(pa.table(columns), path)
    return path


def test_parquet_rows_become_records_with_metadata(tmp_path: Path) -> None:
    path = _write_parquet(
        tmp_path / "prompts.parquet",
        {
            "prompt": ["a red circle", "a blue square"],
            "score": [0.5, 2.0],
            "photo": [{"bytes": b"\x89PNG1", "path": None}, {"bytes": None, "path": "b.png"}],
            "raw": [b"abc", b"de"],
        },
    )
    records = read_prompt_source(str(path), config_path="$.data.train")
    assert [r.prompt for r in records] == ["a red circle", "a blue square"]
    # a struct column other than image / images (condition images, omni_rl.data_images) is metadata as it is
    assert records[0].metadata == {"score": 0.5, "photo": {"bytes": b"\x89PNG1", "path": None}, "raw": b"abc"}
    assert records[1].metadata["photo"] == {"bytes": None, "path": "b.png"}


def test_parquet_caption_column_is_the_prompt_when_there_is_no_prompt_column(tmp_path: Path) -> None:
    path = _write_parquet(tmp_path / "pick.parquet", {"caption": ["a cat"], "label_0": [1.0]})
    [record] = read_prompt_source(str(path), config_path="$.data.train")
    assert record.prompt == "a cat" and record.metadata == {"label_0": 1.0}


def test_parquet_is_recognised_by_its_magic_bytes_under_another_name(tmp_path: Path) -> None:
    path = _write_parquet(tmp_path / "prompts.parquet", {"prompt": ["a dog"]})
    renamed = path.rename(tmp_path / "prompts.data")
    assert [r.prompt for r in read_prompt_source(str(renamed), config_path="$.data.train")] == ["a dog"]


def test_parquet_without_a_prompt_column_names_its_columns(tmp_path: Path) -> None:
    path = _write_parquet(tmp_path / "bad.parquet", {"text": ["a dog"], "chosen": ["a.png"]})
    with pytest.raises(ConfigError, match=r"bad.parquet has no prompt column.*\['text', 'chosen'\]") as info:
        read_prompt_source(str(path), config_path="$.data.train")
    assert "'prompt'" in (info.value.hint or "")


def test_parquet_row_without_a_prompt_is_named(tmp_path: Path) -> None:
    path = _write_parquet(tmp_path / "holes.parquet", {"prompt": ["a dog", None]})
    with pytest.raises(ConfigError, match="row 2 has no prompt"):
        read_prompt_source(str(path), config_path="$.data.train")


def test_empty_parquet_holds_no_prompts(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    path = _write_parquet(tmp_path / "empty.parquet", {"prompt": pa.array([], type=pa.string())})
    with pytest.raises(ConfigError, match="holds no prompts"):
        read_prompt_source(str(path), config_path="$.data.train")


def test_corrupt_parquet_is_a_config_error_naming_the_file(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 this is not really parquet \xff\xfe PAR1")
    with pytest.raises(ConfigError, match=r"cannot read broken.parquet as a parquet file.*\$\.data\.train"):
        read_prompt_source(str(path), config_path="$.data.train")


def test_binary_file_is_a_config_error_not_a_decode_traceback(tmp_path: Path) -> None:
    path = tmp_path / "image.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\xfd")
    with pytest.raises(ConfigError, match="neither a UTF-8 text file nor a parquet file") as info:
        read_prompt_source(str(path), config_path="$.data.train")
    assert "image.png" in info.value.message
    assert ".parquet" in (info.value.hint or "") and ".jsonl" in (info.value.hint or "")


def test_missing_pyarrow_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "prompts.parquet"
    path.write_bytes(b"PAR1" + b"\0" * 16 + b"PAR1")  # never parsed: the import fails first
    real_import = builtins.__import__

    def no_pyarrow(name: str, *args, **kwargs):
        if name == "pyarrow" or name.startswith("pyarrow."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyarrow)
    with pytest.raises(ConfigError, match="pyarrow is not installed") as info:
        read_prompt_source(str(path), config_path="$.data.train")
    assert 'pip install "omni-rl-dpo[parquet]"' in (info.value.hint or "")


def test_jsonl_and_txt_sources_still_read(tmp_path: Path) -> None:
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text(json.dumps({"prompt": "a dog", "tag": 3}) + "\n\n", encoding="utf-8")
    txt = tmp_path / "p.txt"
    txt.write_text("a cat\n\n a bird \n", encoding="utf-8")
    [record] = read_prompt_source(str(jsonl), config_path="$.data.train")
    assert record.prompt == "a dog" and record.metadata == {"tag": 3}
    assert [r.prompt for r in read_prompt_source(str(txt), config_path="$.data.train")] == ["a cat", "a bird"]
