"""The machine-speed probe that scales wall-clock bounds (omni_rl.testing.machine_speed)."""

from __future__ import annotations

import pytest
import torch

from omni_rl.testing.machine_speed import probe_seconds, slowdown


def test_a_slower_machine_stretches_the_bound_and_a_faster_one_keeps_it() -> None:
    assert slowdown(2.8, 2.0) == pytest.approx(1.4)
    assert slowdown(1.0, 2.0) == 1.0


def test_the_probe_times_real_work_and_restores_the_thread_count() -> None:
    before = torch.get_num_threads()
    one = probe_seconds(threads=1, repeats=1)
    assert 0.01 < one < 120
    assert torch.get_num_threads() == before
