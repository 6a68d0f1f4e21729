"""Fixtures of this plugin's tests, defined in flux_helpers and kontext_helpers (importable by name from the test
modules)."""

from flux_helpers import base_pipe, flux_model, tiny_flux_path, tiny_schnell_path  # noqa: F401 - fixtures
from kontext_helpers import kontext_model, kontext_pipe, tiny_kontext_path  # noqa: F401 - fixtures
