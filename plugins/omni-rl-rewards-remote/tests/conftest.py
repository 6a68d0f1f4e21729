"""Fixtures of this plugin's tests; the fakes live in remote_fakes.py (a unique module name: the suites of every
plugin run in one pytest process)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from remote_fakes import FakeVlm, running_fake_vlm


@pytest.fixture
def fake_vlm() -> Iterator[FakeVlm]:
    """A running stand-in for an OpenAI-compatible VLM server; ``fake_vlm.url`` is its API root (``.../v1``)."""
    with running_fake_vlm() as fake:
        yield fake
