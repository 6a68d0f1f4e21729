"""The kit's tests need no model plugin: they build what they test from diffusers' own classes, offline."""

from __future__ import annotations

import os

# Before diffusers/transformers are imported anywhere: never reach for a hub, and keep the output readable.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("DIFFUSERS_VERBOSITY", "error")
