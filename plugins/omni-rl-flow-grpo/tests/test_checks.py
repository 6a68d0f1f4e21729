"""Config checks across sections: cps with a KL term must keep its SDE window off the last step."""

from __future__ import annotations

from pathlib import Path

import pytest
from omni_rl_flow_grpo.config import CPSConfig
from omni_rl_flow_grpo.samplers.window import WindowConfig, sde_window, window_can_reach_last_step

from omni_rl import load_config
from omni_rl.errors import ConfigError

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "sd3_tiny_jpeg.toml"  # rollout steps = 6
CPS_KL = ('sampler.name="cps"', "loss.options.kl_coef=0.04")


#: every valid (window_size, window_range) of these: hi = 0 or the range holds the window
WINDOWS = [
    (size, (lo, hi))
    for size in (0, 1, 2, 3, 6, 8)
    for lo, hi in [(0, 0), (0, 3), (0, 5), (1, 6), (2, 9), (4, 0), (5, 9)]
    if hi == 0 or hi - lo >= size
]


@pytest.mark.parametrize("mode", ["random", "fixed"])
@pytest.mark.parametrize(("size", "window_range"), WINDOWS)
def test_reach_agrees_with_the_drawn_windows(mode: str, size: int, window_range: tuple[int, int]) -> None:
    config = WindowConfig(window_size=size, window_range=window_range, window_mode=mode)
    for steps in (1, 4, 6, 10):
        drawn = any(steps - 1 in sde_window(config, step, steps, seed=3) for step in range(200))
        assert window_can_reach_last_step(config, steps) == drawn, steps


def test_cps_with_kl_and_a_window_on_the_last_step_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as info:
        load_config(EXAMPLE, [*CPS_KL, "sampler.options.window_range=[0, 6]"])
    assert str(info.value).startswith(f"invalid config {EXAMPLE} (1 problem):\n")
    assert (
        "  - invalid value: kl_coef = 0.04 with sampler 'cps': its SDE window (window_size = 2, window_range = "
        "[0, 6], random) can include the last of the 6 rollout steps, where cps has s = sigma' * sin(eta * pi / 2) "
        "= 0 and the KL divides by 2 s^2 (a NaN loss); set $.sampler.options.window_range = [0, 5] (hi <= 5), or "
        "kl_coef = 0, or the flow_sde sampler @ $.loss.options.kl_coef\n"
    ) in str(info.value)


def test_hi_zero_is_the_end_of_the_schedule_and_a_wide_window_is_named() -> None:
    with pytest.raises(ConfigError, match=r"window_range = \[5, 0\], fixed\) .* = \[3, 5\] \(hi <= 5\)"):
        load_config(
            EXAMPLE,
            [*CPS_KL, "sampler.options.window_range=[5, 0]", 'sampler.options.window_mode="fixed"'],
        )
    with pytest.raises(ConfigError, match=r"set \$\.sampler\.options\.window_size below 6 \(the rollout's steps\)"):
        load_config(EXAMPLE, [*CPS_KL, "sampler.options.window_size=6", "sampler.options.window_range=[0, 0]"])


@pytest.mark.parametrize(
    "sets",
    [
        (*CPS_KL,),  # the example's window [0, 3) stays off step 5
        (*CPS_KL, "sampler.options.window_range=[0, 5]"),
        (*CPS_KL, "sampler.options.window_size=0", "sampler.options.window_range=[0, 0]"),  # all but the last
        (*CPS_KL, "sampler.options.window_range=[0, 9]", "rollout.options.steps=10"),  # 9 < 10 steps
        (*CPS_KL, "sampler.options.window_range=[0, 6]", "sampler.options.noise_level=0"),  # nothing is stochastic
        ('sampler.name="cps"', "sampler.options.window_range=[0, 6]"),  # no KL
        ("loss.options.kl_coef=0.04", "sampler.options.window_range=[0, 6]"),  # flow_sde: s > 0 at the last step
    ],
)
def test_configs_that_cannot_divide_by_zero_load(sets: tuple[str, ...]) -> None:
    config = load_config(EXAMPLE, list(sets))
    assert config.components["loss"].options.kl_coef >= 0
    assert isinstance(config.components["sampler"].options, (CPSConfig, WindowConfig))


def test_grpo_with_groups_of_one_is_a_config_error() -> None:
    """qa-2026-12 N9: group_size = 1 made every grpo advantage 0, so the run trained nothing and exited 0."""
    with pytest.raises(ConfigError) as info:
        load_config(EXAMPLE, ["rollout.options.group_size=1"])
    message = str(info.value)
    assert "invalid value: group_size = 1 with the 'grpo' advantage" in message
    assert "set group_size to 2 or more" in message and message.count("@ $.rollout.options.group_size") == 1
    assert load_config(EXAMPLE, ["rollout.options.group_size=2"]).components["advantage"].name == "grpo"
