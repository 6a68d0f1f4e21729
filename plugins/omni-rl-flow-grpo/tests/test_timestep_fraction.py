"""DanceGRPO's ``timestep_fraction`` (docs/math.md#timestep-fraction): each sample trains ceil(f·W) of its W window
steps, a subset drawn from (run seed, training step, sample seed) alone, so every worker, process and resume agrees."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from fractions import Fraction

import pytest
from omni_rl_flow_grpo.config import CPSConfig, FlowSDEConfig
from omni_rl_flow_grpo.samplers.cps import CPSSampler
from omni_rl_flow_grpo.samplers.flow_sde import FlowSDESampler
from omni_rl_flow_grpo.samplers.window import WindowConfig, trained_positions


def test_default_trains_the_whole_window() -> None:
    config = WindowConfig()
    assert config.timestep_fraction == 1.0
    assert trained_positions(config, 9, step=3, run_seed=0, sample_seed=5) == list(range(9))
    assert trained_positions(config, 0, step=3, run_seed=0, sample_seed=5) == []


@pytest.mark.parametrize(
    ("fraction", "window_len", "count"),
    [(0.6, 9, 6), (0.6, 15, 9), (0.5, 4, 2), (0.6, 3, 2), (0.01, 5, 1), (0.99, 10, 10), (0.28, 25, 7), (0.56, 25, 14)],
)
def test_count_is_the_ceiling_of_f_times_w(fraction: float, window_len: int, count: int) -> None:
    """ceil(f·W) of the exact product: 0.28·25 is 7.000000000000001 in floats and must still give 7."""
    assert count == math.ceil(Fraction(str(fraction)) * window_len)  # the table itself is exact arithmetic
    config = WindowConfig(timestep_fraction=fraction)
    for sample_seed in range(20):
        positions = trained_positions(config, window_len, step=1, run_seed=0, sample_seed=sample_seed)
        assert len(positions) == count


def test_positions_are_sorted_distinct_and_inside_the_window() -> None:
    config = WindowConfig(timestep_fraction=0.4)
    seen = set()
    for sample_seed in range(200):
        positions = trained_positions(config, 10, step=2, run_seed=1, sample_seed=sample_seed)
        assert positions == sorted(set(positions)) and all(0 <= p < 10 for p in positions)
        seen.update(positions)
    assert seen == set(range(10))  # every step gets trained by some sample


def test_draw_depends_on_each_key() -> None:
    config = WindowConfig(timestep_fraction=0.5)

    def draws(**changes: int) -> list[list[int]]:
        key = {"step": 1, "run_seed": 0} | changes
        return [trained_positions(config, 12, sample_seed=s, **key) for s in range(10)]

    base = draws()
    assert draws() == base  # a pure function of its key
    assert len({tuple(p) for p in base}) > 1  # samples differ
    assert draws(step=2) != base and draws(run_seed=1) != base


def test_positions_agree_across_processes() -> None:
    """Workers are separate processes with salted hashes: the draw must not depend on that."""
    code = (
        "from omni_rl_flow_grpo.samplers.window import WindowConfig, trained_positions;"
        "c = WindowConfig(timestep_fraction=0.6);"
        "print([trained_positions(c, 9, 4, 7, s) for s in range(30)])"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    config = WindowConfig(timestep_fraction=0.6)
    assert out.stdout.strip() == str([trained_positions(config, 9, 4, 7, s) for s in range(30)])


def test_the_samplers_expose_it() -> None:
    """flow_sde and cps get the member from WindowedSampler, with their own option."""
    for sampler in (FlowSDESampler(FlowSDEConfig(timestep_fraction=0.5)), CPSSampler(CPSConfig(timestep_fraction=0.5))):
        assert sampler.trained_positions(8, 1, 0, 3) == trained_positions(sampler.config, 8, 1, 0, 3)
        assert len(sampler.trained_positions(8, 1, 0, 3)) == 4


@pytest.mark.parametrize("fraction", [0.0, -0.1, 1.5, float("nan")])
def test_fraction_must_be_in_zero_one(fraction: float) -> None:
    with pytest.raises(ValueError, match=r"timestep_fraction must be in \(0, 1\]"):
        WindowConfig(timestep_fraction=fraction)
