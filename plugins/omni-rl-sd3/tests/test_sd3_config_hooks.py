"""Discovery, the light-import rule for hooks.py, and SD3Config validation."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import attrs
import pytest
from omni_rl_sd3.config import DEFAULT_LORA_TARGETS, SD3Config

from omni_rl.specs import ModelSpec


def test_entry_point_is_registered() -> None:
    (entry,) = [ep for ep in entry_points(group="omni_rl") if ep.value == "omni_rl_sd3.hooks"]
    assert entry.name == "sd3"


def test_hooks_yield_the_sd3_model_spec() -> None:
    from omni_rl_sd3.hooks import omni_rl_models

    (spec,) = omni_rl_models()
    assert isinstance(spec, ModelSpec)
    assert spec.name == "sd3"
    assert spec.config is SD3Config
    assert {"sd3_5", "stable_diffusion_3"} <= set(spec.aliases)


def test_hooks_import_without_torch_or_diffusers() -> None:
    code = (
        "import sys, omni_rl_sd3.hooks as h; h.omni_rl_models(); "
        "heavy = sorted(m for m in ('torch', 'diffusers', 'transformers', 'peft') if m in sys.modules); "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_config_defaults() -> None:
    config = SD3Config(path="/models/sd3.5-medium")
    assert config.dtype == "float32"
    assert config.use_t5 is True
    assert config.lora_rank == 32
    assert config.effective_lora_alpha == 32.0
    assert config.lora_target_modules == DEFAULT_LORA_TARGETS
    assert config.max_sequence_length == 256
    assert config.lora_init == "gaussian"  # Flow-GRPO's
    assert config.build_tiny_if_missing is False
    assert attrs.evolve(config, lora_alpha=64).effective_lora_alpha == 64.0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"path": " "}, "path must not be empty.*StableDiffusion3Pipeline directory"),
        ({"dtype": "float16"}, "must be in"),
        ({"lora_rank": -1}, "lora_rank must be an integer >= 0, got -1; 0 = full fine-tuning"),
        ({"lora_rank": True}, "lora_rank must be an integer >= 0, got True"),
        ({"lora_alpha": 0}, "lora_alpha must be a finite number > 0"),
        ({"lora_target_modules": ()}, "at least one module"),
        ({"lora_target_modules": ("to_q", "")}, "non-empty strings"),
        ({"max_sequence_length": 0}, "max_sequence_length must be an integer >= 1"),
        ({"lora_init": "pissa"}, "must be in"),
    ],
)
def test_config_rejects_bad_values(changes: dict, message: str) -> None:
    options = {"path": "/models/sd3", **changes}
    with pytest.raises(ValueError, match=message):
        SD3Config(**options)


def test_target_modules_accept_lists_from_toml() -> None:
    config = SD3Config(path="/m", lora_target_modules=["attn.to_q", "attn.to_v"])
    assert config.lora_target_modules == ("attn.to_q", "attn.to_v")
