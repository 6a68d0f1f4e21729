"""The shared option bases: one name, default, check and error path per option in every model config, and the
old ``offload_text_encoder`` spelling read (with a warning) for one release."""

from __future__ import annotations

import warnings

import attrs
import pytest
from omni_rl_pipelines.options import (
    LoraOptions,
    MemoryOptions,
    PipelineOptions,
    lora_rank_option,
    lora_targets_option,
)
from omni_rl_pipelines.speed import SpeedOptions

from omni_rl.config.converter import make_converter, shared_converter, structure
from omni_rl.config.toml import dumps, parse_toml_text, to_toml_value

TARGETS = ("attn.to_q", "attn.to_v")


@attrs.frozen(kw_only=True)
class ImageOptions(PipelineOptions):
    """A model config as SD3's is built: the pipeline bases, a path and its own target list."""

    path: str
    lora_target_modules: tuple[str, ...] = lora_targets_option(TARGETS)


@attrs.frozen(kw_only=True)
class OffloadedOptions(MemoryOptions, PipelineOptions):
    """A model config as FLUX's, Qwen-Image's and Wan's are built, with its own default rank."""

    path: str
    lora_rank: int = lora_rank_option(64)
    lora_target_modules: tuple[str, ...] = lora_targets_option(TARGETS)


def _structure(cls: type, options: dict) -> tuple[object, list[str]]:
    return structure(shared_converter(), options, cls, "$.model.options")


def test_defaults_are_the_same_in_every_model() -> None:
    image = ImageOptions(path="p")
    assert isinstance(image, LoraOptions) and isinstance(image, SpeedOptions)
    assert (image.dtype, image.lora_rank, image.lora_alpha, image.lora_init) == ("float32", 32, None, "gaussian")
    assert image.lora_target_modules == TARGETS and image.effective_lora_alpha == 32.0
    assert not image.gradient_checkpointing and not image.build_tiny_if_missing and image.compile == "off"
    offloaded = OffloadedOptions(path="p", lora_alpha=128)
    assert offloaded.lora_rank == 64 and offloaded.effective_lora_alpha == 128.0  # a model's own default rank
    assert (offloaded.offload_text_encoders, offloaded.offload_vae, offloaded.prompt_cache_size) == (False, False, 4096)
    assert "offload_text_encoder=" not in repr(offloaded)  # the deprecated spelling is no option to show


def test_every_bad_value_is_reported_with_its_option_path() -> None:
    _, problems = _structure(
        OffloadedOptions,
        {
            "path": "p",
            "lora_rank": -1,
            "lora_alpha": 0,
            "lora_target_modules": [],
            "prompt_cache_size": -2,
            "dtype": "float16",
            "bogus": 1,
        },
    )
    text = "\n".join(problems)
    assert (
        "lora_rank must be an integer >= 0, got -1; 0 = full fine-tuning of the transformer @ $.model.options.lora_rank"
        in text
    )
    assert (
        "lora_alpha must be a finite number > 0 (or left out), got 0.0" in text and "$.model.options.lora_alpha" in text
    )
    assert "lora_target_modules must name at least one module" in text
    assert "prompt_cache_size must be an integer >= 0, got -2 @ $.model.options.prompt_cache_size" in text
    assert "$.model.options.dtype" in text
    assert "unknown key 'bogus' @ $.model.options" in text


def test_python_construction_is_as_strict_as_toml() -> None:
    """The checks are omni_rl.validators': a boolean is no rank, a float no cache size, whoever builds the options."""
    with pytest.raises(ValueError, match="lora_rank must be an integer"):
        ImageOptions(path="p", lora_rank=True)
    with pytest.raises(ValueError, match="prompt_cache_size must be an integer"):
        OffloadedOptions(path="p", prompt_cache_size=2.0)
    with pytest.raises(ValueError, match="module names must be non-empty strings without spaces"):
        ImageOptions(path="p", lora_target_modules=(" attn.to_q",))


def test_the_old_offload_spelling_is_read_with_a_warning_and_written_with_the_new_name() -> None:
    with pytest.warns(FutureWarning, match="offload_text_encoder is deprecated.*offload_text_encoders"):
        options, problems = _structure(OffloadedOptions, {"path": "p", "offload_text_encoder": True})
    assert problems == []
    assert options.offload_text_encoders is True and options.offload_text_encoder is None
    # the run directory's resolved config holds the new name only, and reloads without a warning
    text = dumps({"options": to_toml_value(make_converter().unstructure(options))})
    assert "offload_text_encoders = true" in text and "offload_text_encoder =" not in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again, _ = _structure(OffloadedOptions, parse_toml_text(text)["options"])
    assert again == options


def test_the_old_and_new_offload_spellings_must_agree() -> None:
    with pytest.warns(FutureWarning):
        options = OffloadedOptions(path="p", offload_text_encoder=True, offload_text_encoders=True)
    assert options.offload_text_encoders is True
    with pytest.raises(ValueError, match="contradicts offload_text_encoders = true; keep only offload_text_encoders"):
        OffloadedOptions(path="p", offload_text_encoder=False, offload_text_encoders=True)


def test_the_options_import_without_torch() -> None:
    import subprocess
    import sys

    code = "import sys, omni_rl_pipelines.options; assert 'torch' not in sys.modules, 'torch imported'"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
