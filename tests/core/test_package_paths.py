"""``package:<module>:<path>`` resolution shared by the model plugins."""

from __future__ import annotations

import pytest

from omni_rl.errors import ConfigError
from omni_rl.package_paths import is_package_path, package_path


def test_resolves_a_file_shipped_in_a_package() -> None:
    path = package_path("package:omni_rl:errors.py")
    assert path.is_file() and path.name == "errors.py"
    assert is_package_path("package:omni_rl:x") and not is_package_path("/models/x")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("package:no_such_module_xyz:pretrained", "cannot resolve"),
        ("package:omni_rl:no/such/dir", "which does not exist"),
        ("package:omni_rl", "cannot resolve"),
    ],
)
def test_a_bad_spec_is_a_config_error_naming_it(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        package_path(spec, "pipeline")
    assert spec in str(info.value)
