"""Keyword differences between the diffusers versions the plugin supports (``diffusers>=0.32``)."""

from __future__ import annotations

from functools import cache
from typing import Any


@cache
def _diffusers_takes_dtype() -> bool:
    # Newer diffusers renamed from_pretrained's ``torch_dtype`` to ``dtype`` and warn on the old name; older ones
    # only know ``torch_dtype``. The helper that resolves the two exists exactly in the versions that take dtype.
    try:
        from diffusers.utils.deprecation_utils import _resolve_dtype  # noqa: F401
    except ImportError:
        return False
    return True


def dtype_kwargs(dtype: Any) -> dict[str, Any]:
    """``{"dtype": dtype}`` or ``{"torch_dtype": dtype}``, whichever this diffusers' from_pretrained expects."""
    return {"dtype": dtype} if _diffusers_takes_dtype() else {"torch_dtype": dtype}
