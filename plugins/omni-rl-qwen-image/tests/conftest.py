"""Fixtures of this plugin's tests, defined in qwen_image_helpers (importable by name from the test modules)."""

from qwen_image_helpers import base_pipe, qwen_model, tiny_qwen_path  # noqa: F401 - fixtures
