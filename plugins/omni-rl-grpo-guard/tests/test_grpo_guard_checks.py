"""`omni-rl check` refuses grpo_guard with cps (RatioNorm is derived for a normalised Gaussian log-prob), names the
option and the fix, and accepts what the math allows: flow_sde with or without the KL term, and a cps that draws
no noise."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_rl import load_config
from omni_rl.cli import main
from omni_rl.errors import ConfigError

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_grpo_guard.toml"


def test_the_example_passes_check() -> None:
    assert main(["check", str(EXAMPLE)]) == 0


@pytest.mark.parametrize("kl", ["0.0", "0.04"])
def test_cps_is_refused_with_the_option_and_the_fix(kl: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(EXAMPLE, ['sampler.name="cps"', "sampler.options={}", f"loss.options.kl_coef={kl}"])
    assert (
        "  - invalid value: sampler 'cps' with loss 'grpo_guard': RatioNorm's bias and scale are derived for a "
        "normalised Gaussian log-prob, and cps scores a step by -mean (x' - mu)^2 without the 1/(2 s^2); set "
        '[sampler] name = "flow_sde", or use loss "flow_grpo" or "flow_dppo" with cps @ $.sampler.name\n'
    ) in str(info.value) + "\n"


@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("loss.options.kl_coef=0.04",),
        ("loss.options.kl_coef=0.04", "sampler.options.window_range=[8, 10]", 'sampler.options.window_mode="fixed"'),
        ('sampler.name="cps"', "sampler.options={noise_level = 0.0}"),  # no noise: nothing trained, nothing wrong
        ('loss.name="flow_grpo"', "loss.options={}", 'sampler.name="cps"', "sampler.options={}"),  # not ours
    ],
)
def test_what_the_math_allows_loads(sets: tuple[str, ...]) -> None:
    config = load_config(EXAMPLE, list(sets))
    assert config.components["loss"].name in ("grpo_guard", "flow_grpo")
