"""Fixtures the shapes tests share (fixtures only: the suite runs every plugin's tests in one pytest, where
``from conftest import`` could find another plugin's conftest)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One torch thread: the shipped models' recorded vals were measured with one, and on a shared 2-core machine
    two threads stall each other at every barrier (4x slower)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
