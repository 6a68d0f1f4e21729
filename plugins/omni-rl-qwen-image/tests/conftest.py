"""Fixtures of this plugin's tests, defined in qwen_image_helpers and qwen_image_edit_helpers (importable by name
from the test modules)."""

from qwen_image21_helpers import q21_model, tiny_q21_path  # noqa: F401 - fixtures
from qwen_image_edit_helpers import (  # noqa: F401 - fixtures
    edit_model,
    edit_pipe,
    plus_model,
    plus_pipe,
    tiny_edit_path,
    tiny_plus_path,
)
from qwen_image_helpers import base_pipe, qwen_model, tiny_qwen_path  # noqa: F401 - fixtures
