"""MixGRPO's progressive SDE window (docs/math.md#sde-window): start = min(r0 + floor((t - 1) / iters_per_group)·S,
r1 - W) for the 1-based training step t, clipped to the schedule, staying at the end once there."""

from __future__ import annotations

import cattrs
import pytest
from omni_rl_flow_grpo.config import FlowSDEConfig
from omni_rl_flow_grpo.samplers.window import WindowConfig, sde_window, window_can_reach_last_step


def _starts(config: WindowConfig, steps: range, num_steps: int = 10) -> list[int]:
    return [sde_window(config, t, num_steps, seed=0).start for t in steps]


def test_hand_computed_starts_with_the_default_stride() -> None:
    """W = 2, range [1, 8), 3 training steps per position, S = W = 2: starts 1, 3, 5, then min(7, 8 - 2) = 6."""
    config = WindowConfig(window_size=2, window_range=(1, 8), window_mode="progressive", iters_per_group=3)
    assert _starts(config, range(1, 13)) == [1, 1, 1, 3, 3, 3, 5, 5, 5, 6, 6, 6]
    assert sde_window(config, 500, 10, seed=0) == range(6, 8)  # stays at the end of the range


def test_hand_computed_starts_with_stride_one_as_the_reference_script() -> None:
    """MixGRPO's script: W = 4, iters_per_group 25, prog_overlap_step 1; here over a 10-step schedule (hi = 0 is
    its end, so the last start is 10 - 4 = 6)."""
    config = WindowConfig(window_size=4, window_mode="progressive", iters_per_group=25, window_stride=1)
    assert _starts(config, range(1, 26)) == [0] * 25
    assert _starts(config, [26, 50, 51, 75, 76, 151, 175, 176, 10_000]) == [1, 1, 2, 2, 3, 6, 6, 6, 6]
    assert all(len(sde_window(config, t, 10, seed=0)) == 4 for t in range(1, 300))


def test_equals_the_reference_s_stateful_counter() -> None:
    """The reference keeps a counter it advances after every iteration (+S every iters_per_group iterations,
    clipped at the last start); the closed form is a function of t alone, so a resumed run needs no state."""
    config = WindowConfig(
        window_size=3, window_range=(2, 9), window_mode="progressive", iters_per_group=4, window_stride=2
    )
    start, done, expected = 2, 0, []
    for _ in range(60):
        expected.append(start)
        done += 1
        if done == 4:
            done, start = 0, min(start + 2, 9 - 3)
    assert _starts(config, range(1, 61), num_steps=12) == expected


def test_clipped_to_a_shorter_schedule() -> None:
    """hi beyond the schedule becomes num_steps; a range starting past the last start is moved left."""
    wide = WindowConfig(window_size=3, window_range=(0, 12), window_mode="progressive", iters_per_group=1)
    assert _starts(wide, range(1, 10), num_steps=8) == [0, 3, 5, 5, 5, 5, 5, 5, 5]  # S = 3; last start 8 - 3
    late = WindowConfig(window_size=2, window_range=(6, 0), window_mode="progressive", iters_per_group=1)
    assert _starts(late, range(1, 5), num_steps=5) == [3, 3, 3, 3]
    big = WindowConfig(window_size=6, window_mode="progressive", iters_per_group=1)
    assert sde_window(big, 7, 4, seed=0) == range(0, 4)  # W clipped to the schedule


def test_depends_on_the_step_alone() -> None:
    """Not on the seed (every worker, and a resumed run, gets the same window); validation's step -1 and a step 0
    count as t = 1."""
    config = WindowConfig(window_size=2, window_range=(0, 8), window_mode="progressive", iters_per_group=2)
    for t in range(1, 30):
        assert sde_window(config, t, 10, seed=0) == sde_window(config, t, 10, seed=12345)
    assert sde_window(config, -1, 10, seed=0) == sde_window(config, 0, 10, seed=0) == range(0, 2)


@pytest.mark.parametrize(("size", "window_range"), [(1, (0, 0)), (2, (0, 5)), (3, (4, 0)), (2, (1, 9))])
def test_reach_of_the_last_step_agrees_with_the_windows(size: int, window_range: tuple[int, int]) -> None:
    config = WindowConfig(window_size=size, window_range=window_range, window_mode="progressive", iters_per_group=1)
    for num_steps in (4, 6, 10):
        reached = any(num_steps - 1 in sde_window(config, t, num_steps, seed=0) for t in range(1, 50))
        assert window_can_reach_last_step(config, num_steps) == reached


def test_options_from_a_config_file_and_their_errors() -> None:
    strict = cattrs.Converter(forbid_extra_keys=True)
    options = {
        "window_size": 4,
        "window_range": [0, 6],
        "window_mode": "progressive",
        "iters_per_group": 25,
        "window_stride": 1,
        "ode_solver": "dpm_solver_2m",
    }
    config = strict.structure(options, FlowSDEConfig)
    assert (config.window_range, config.iters_per_group, config.window_stride) == ((0, 6), 25, 1)
    assert config.ode_solver == "dpm_solver_2m"
    with pytest.raises(ValueError, match=r'window_mode = "progressive" needs window_size >= 1'):
        WindowConfig(window_mode="progressive")
    with pytest.raises(ValueError, match="iters_per_group must be an integer >= 1"):
        WindowConfig(window_size=2, window_mode="progressive", iters_per_group=0)
    with pytest.raises(ValueError, match="window_stride must be an integer >= 0"):
        WindowConfig(window_size=2, window_mode="progressive", window_stride=-1)
    with pytest.raises(ValueError, match="'ode_solver' must be in"):
        WindowConfig(ode_solver="heun")  # type: ignore[arg-type]
