"""The tiny random SD3 pipeline: offline, loadable by diffusers alone, deterministic, small."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from omni_rl_pipelines.tiny import TINY_MARKER
from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

from omni_rl.errors import ConfigError


def _digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*.safetensors"))
    }


def test_loads_and_runs_with_diffusers_alone(base_pipe, tiny_sd3_path: Path) -> None:
    import torch

    images = base_pipe(
        "a red circle", num_inference_steps=2, guidance_scale=4.5, generator=torch.Generator().manual_seed(0),
        output_type="np",
    ).images  # fmt: skip
    assert images.shape == (1, 64, 64, 3)  # the default size: 32x32 latents, 2x VAE
    config = base_pipe.vae.config
    assert (config.scaling_factor, config.shift_factor) == (1.5305, 0.0609)
    assert base_pipe.scheduler.config.shift == 3.0
    assert base_pipe.transformer.config.in_channels == 16 and base_pipe.transformer.config.patch_size == 2
    assert json.loads((tiny_sd3_path / TINY_MARKER).read_text())["random_weights"] is True
    assert sum(p.stat().st_size for p in tiny_sd3_path.rglob("*") if p.is_file()) < 5 * 2**20


def test_tokenizers_follow_the_sd3_layout(base_pipe) -> None:
    clip, clip_2, t5 = base_pipe.tokenizer, base_pipe.tokenizer_2, base_pipe.tokenizer_3
    assert clip.model_max_length == 77
    ids = clip("a cat").input_ids
    assert ids[0] == clip.bos_token_id and ids[-1] == clip.eos_token_id == base_pipe.text_encoder.config.eos_token_id
    assert clip_2.pad_token == "!"
    assert t5("a cat").input_ids[-1] == t5.eos_token_id == 1
    assert t5.unk_token_id not in t5("A photo of a cat, 3 dogs!").input_ids


def test_same_seed_same_weights(tmp_path: Path, tiny_sd3_path: Path) -> None:
    again = build_tiny_sd3_pipeline(tmp_path / "again", seed=0)
    assert _digests(again) == _digests(tiny_sd3_path)


def test_refuses_to_overwrite_by_accident(tiny_sd3_path: Path) -> None:
    with pytest.raises(ConfigError) as error:
        build_tiny_sd3_pipeline(tiny_sd3_path)
    assert "overwrite=True" in error.value.hint
    before = _digests(tiny_sd3_path)
    assert build_tiny_sd3_pipeline(tiny_sd3_path, seed=1, exist_ok=True) == tiny_sd3_path  # kept, not rebuilt
    assert _digests(tiny_sd3_path) == before


def test_rejects_inconsistent_shapes(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="t5_d_model"):
        build_tiny_sd3_pipeline(tmp_path / "x", clip_hidden_sizes=(64, 64), t5_d_model=96)
    assert not (tmp_path / "x").exists()
