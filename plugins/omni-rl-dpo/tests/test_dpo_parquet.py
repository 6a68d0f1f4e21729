"""Offline preference pairs from .parquet files: read by the core's prompt reader, replayed by ``preference_pairs``.

Image columns hold paths, encoded PNG/JPEG bytes, or HuggingFace datasets' ``{"bytes", "path"}`` struct; the
columns are ``prompt``/``chosen``/``rejected`` (as the .jsonl lines) or Pick-a-Pic's ``caption``/``jpg_0``/
``jpg_1``/``label_0``.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from omni_rl_dpo.config import PreferencePairsConfig
from omni_rl_dpo.preference_rollout import PreferencePairsRollout
from PIL import Image

from omni_rl.data import PromptRecord, read_prompt_source
from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import RolloutRequest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

SIZE = 32
PROMPTS = ["a red square", "a blue circle"]


def _pixels(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=(SIZE, SIZE, 3), dtype=np.uint8)


def _encoded(pixels: np.ndarray, fmt: str = "PNG") -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format=fmt)
    return buffer.getvalue()


def _decoded(data: bytes) -> np.ndarray:
    """What the backend must see for these bytes (JPEG is lossy: compare against its decoding, not the source)."""
    return np.array(Image.open(io.BytesIO(data)).convert("RGB"))


def _write(path: Path, columns: dict[str, list]) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def _request(records: list[PromptRecord]) -> RolloutRequest:
    """What the trainer sends for these records: each twice (group size 2), with its metadata."""
    return RolloutRequest(
        prompts=[r.prompt for r in records for _ in range(2)],
        group_ids=[k for k in range(len(records)) for _ in range(2)],
        seeds=list(range(2 * len(records))),
        step=1,
        record_trajectory=False,
        metadata=[r.metadata for r in records for _ in range(2)],
    )


def _generate(model, path: Path, **options):
    records = read_prompt_source(str(path), config_path="$.data.train")
    backend = PreferencePairsRollout(PreferencePairsConfig(height=SIZE, width=SIZE, batch_size=3, **options))
    return backend.generate(model, None, _request(records))


def _assert_pairs(batch, expected: list[tuple[np.ndarray, np.ndarray]]) -> None:
    for k, (chosen, rejected) in enumerate(expected):
        assert torch.equal(batch.images[2 * k], torch.from_numpy(chosen)), f"chosen of pair {k}"
        assert torch.equal(batch.images[2 * k + 1], torch.from_numpy(rejected)), f"rejected of pair {k}"


def test_parquet_with_image_paths(sd3_lora_model, tmp_path: Path) -> None:
    pairs = [(_pixels(2 * k), _pixels(2 * k + 1)) for k in range(len(PROMPTS))]
    names = {"chosen": [], "rejected": []}
    for k, (chosen, rejected) in enumerate(pairs):
        for role, pixels in (("chosen", chosen), ("rejected", rejected)):
            Image.fromarray(pixels).save(tmp_path / f"{role}_{k}.png")
            names[role].append(f"{role}_{k}.png")  # relative: resolved against image_root
    path = _write(tmp_path / "pairs.parquet", {"prompt": PROMPTS, **names})
    batch = _generate(sd3_lora_model, path, image_root=str(tmp_path))
    assert batch.prompts == [p for p in PROMPTS for _ in range(2)]
    _assert_pairs(batch, pairs)
    torch.testing.assert_close(batch.final_latents, sd3_lora_model.encode_images(batch.images))


def test_parquet_with_encoded_bytes_and_image_structs(sd3_lora_model, tmp_path: Path) -> None:
    pairs = [(_pixels(10 + k), _pixels(20 + k)) for k in range(len(PROMPTS))]
    path = _write(
        tmp_path / "pairs.parquet",
        {
            "prompt": PROMPTS,
            "chosen": [_encoded(c) for c, _ in pairs],  # raw PNG bytes
            # HuggingFace datasets' Image feature: the bytes win over a path that does not exist here
            "rejected": [{"bytes": _encoded(r), "path": f"missing_{k}.png"} for k, (_, r) in enumerate(pairs)],
        },
    )
    batch = _generate(sd3_lora_model, path)
    _assert_pairs(batch, pairs)
    torch.testing.assert_close(batch.final_latents, sd3_lora_model.encode_images(batch.images))


def test_parquet_struct_with_only_a_path(sd3_lora_model, tmp_path: Path) -> None:
    chosen, rejected = _pixels(30), _pixels(31)
    Image.fromarray(chosen).save(tmp_path / "c.png")
    Image.fromarray(rejected).save(tmp_path / "r.png")
    path = _write(
        tmp_path / "pairs.parquet",
        {
            "prompt": PROMPTS[:1],
            "chosen": [{"bytes": None, "path": str(tmp_path / "c.png")}],
            "rejected": [{"bytes": None, "path": str(tmp_path / "r.png")}],
        },
    )
    _assert_pairs(_generate(sd3_lora_model, path), [(chosen, rejected)])


def test_pickapic_layout_follows_label_0(sd3_lora_model, tmp_path: Path) -> None:
    images = [[_encoded(_pixels(40 + 2 * k + j), "JPEG") for j in range(2)] for k in range(2)]
    path = _write(
        tmp_path / "pickapic.parquet",
        {
            "caption": PROMPTS,
            "jpg_0": [pair[0] for pair in images],
            "jpg_1": [pair[1] for pair in images],
            "label_0": [1.0, 0.0],  # row 0 prefers jpg_0, row 1 prefers jpg_1
            "label_1": [0.0, 1.0],
        },
    )
    batch = _generate(sd3_lora_model, path)
    assert batch.prompts == [p for p in PROMPTS for _ in range(2)]
    _assert_pairs(
        batch,
        [
            (_decoded(images[0][0]), _decoded(images[0][1])),
            (_decoded(images[1][1]), _decoded(images[1][0])),
        ],
    )


def test_pickapic_ties_are_refused(sd3_lora_model, tmp_path: Path) -> None:
    data = _encoded(_pixels(50))
    path = _write(tmp_path / "tie.parquet", {"caption": ["a cat"], "jpg_0": [data], "jpg_1": [data], "label_0": [0.5]})
    with pytest.raises(RuntimeFailure, match=r"label_0 = 0\.5, which prefers neither image") as info:
        _generate(sd3_lora_model, path)
    assert "0 or 1" in (info.value.hint or "")


def test_undecodable_bytes_name_the_image(sd3_lora_model, tmp_path: Path) -> None:
    path = _write(
        tmp_path / "bad.parquet",
        {"prompt": ["a cat"], "chosen": [b"not an image at all"], "rejected": [_encoded(_pixels(60))]},
    )
    with pytest.raises(RuntimeFailure, match=r"cannot read the 'chosen' image of prompt 'a cat' \(19 bytes\)") as info:
        _generate(sd3_lora_model, path)
    assert "PNG or JPEG" in (info.value.hint or "")


def test_an_image_cell_of_another_type_is_reported(sd3_lora_model, tmp_path: Path) -> None:
    path = _write(tmp_path / "ints.parquet", {"prompt": ["a cat"], "chosen": [3], "rejected": [4]})
    with pytest.raises(RuntimeFailure, match=r"no 'chosen' image path or image bytes \(got int\)") as info:
        _generate(sd3_lora_model, path)
    assert "jpg_0" in (info.value.hint or "") and "parquet" in (info.value.hint or "")
