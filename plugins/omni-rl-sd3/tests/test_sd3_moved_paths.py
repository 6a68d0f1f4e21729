"""The shared diffusers kit moved to omni-rl-pipelines; its old omni_rl_sd3 paths keep working for one release,
each warning once with the new path, and hand back the very same objects."""

from __future__ import annotations

import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest

MODULES = [
    "compat",
    "cuda_graphs",
    "lora",
    "packed_latents",
    "pipeline_model",
    "prompt_cache",
    "speed",
    "testing",
    "tiny_tokenizers",
]

NAMES = [
    ("config", "DTYPES", "options"),
    ("config", "LORA_INITS", "options"),
    ("config", "check_lora_rank", "options"),
    ("config", "check_lora_alpha", "options"),
    ("config", "check_lora_targets", "options"),
    ("config", "check_non_negative", "options"),
    ("loading", "PipelineKind", "loading"),
    ("tiny", "TINY_MARKER", "tiny"),
    ("tiny", "write_tiny_pipeline", "tiny"),
    ("tiny", "tiny_vae", "tiny"),
    ("tiny", "tiny_t5", "tiny"),
]


@pytest.mark.parametrize("name", MODULES)
def test_a_moved_module_is_the_new_module_with_a_warning(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, f"omni_rl_sd3.{name}", raising=False)
    with pytest.warns(DeprecationWarning, match=rf"omni_rl_sd3\.{name} moved to omni_rl_pipelines\.{name}"):
        old = importlib.import_module(f"omni_rl_sd3.{name}")
    assert old is importlib.import_module(f"omni_rl_pipelines.{name}")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module(f"omni_rl_sd3.{name}") is old  # warned once


@pytest.mark.parametrize(("module", "name", "new"), NAMES)
def test_a_moved_name_is_the_new_object_with_a_warning(module: str, name: str, new: str) -> None:
    old_module = importlib.import_module(f"omni_rl_sd3.{module}")
    with pytest.warns(DeprecationWarning, match=rf"omni_rl_sd3\.{module}\.{name} moved to omni_rl_pipelines\.{new}"):
        value = getattr(old_module, name)
    assert value is getattr(importlib.import_module(f"omni_rl_pipelines.{new}"), name)


def test_sd3s_own_names_do_not_warn_and_unknown_names_still_fail() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from omni_rl_sd3.config import DEFAULT_LORA_TARGETS, SD3Config  # noqa: F401
        from omni_rl_sd3.loading import SD3, check_pipeline_dir, load_pipeline  # noqa: F401
        from omni_rl_sd3.tiny import TinySD3Shape, build_tiny_sd3_pipeline  # noqa: F401
    import omni_rl_sd3.tiny

    with pytest.raises(AttributeError, match="has no attribute 'not_a_name'"):
        omni_rl_sd3.tiny.not_a_name  # noqa: B018


def test_nothing_in_the_plugins_imports_the_old_paths() -> None:
    """FLUX, Qwen-Image and Wan import the kit from omni_rl_pipelines (never omni_rl_sd3), and SD3's own modules do
    not go through the stubs either."""
    plugins = Path(__file__).resolve().parents[2]
    importing = re.compile(r"^\s*(from|import) omni_rl_sd3\b", re.MULTILINE)
    offenders = [
        str(source.relative_to(plugins))
        for name in ("omni-rl-flux", "omni-rl-qwen-image", "omni-rl-wan", "omni-rl-pipelines")
        for source in (plugins / name / "src").rglob("*.py")
        if importing.search(source.read_text(encoding="utf-8"))
    ]
    stubs = re.compile(rf"^\s*from omni_rl_sd3\.({'|'.join(MODULES)}) import", re.MULTILINE)
    offenders += [
        str(source.relative_to(plugins))
        for source in (plugins / "omni-rl-sd3" / "src").rglob("*.py")
        if stubs.search(source.read_text(encoding="utf-8"))
    ]
    assert offenders == []
