"""``path = "package:<module>:<dir>"`` loads a pipeline shipped inside an installed package (as the shapes
benchmark ships its pretrained models)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from omni_rl_qwen_image.config import QwenImageConfig
from omni_rl_qwen_image.loading import QWEN_IMAGE

from omni_rl.errors import ConfigError


def test_a_package_path_resolves_to_the_shipped_directory(
    tiny_qwen_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "shipped_models_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copytree(tiny_qwen_path, package / "pretrained")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    sys.modules.pop("shipped_models_pkg", None)
    resolved = QWEN_IMAGE.resolve(QwenImageConfig(path="package:shipped_models_pkg:pretrained"))
    assert Path(resolved) == package / "pretrained"
    with pytest.raises(ConfigError, match="does not exist"):
        QWEN_IMAGE.resolve(QwenImageConfig(path="package:shipped_models_pkg:missing"))
