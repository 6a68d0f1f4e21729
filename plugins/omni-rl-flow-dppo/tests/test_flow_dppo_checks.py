"""`omni-rl check` refuses flow_dppo with a cps window that can reach the last step (cps's std is 0 there and the
trust region's KL divides by it), KL term or not, naming the option and the fix; it accepts cps off the last step
(with the KL term too) and flow_sde anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from omni_rl import load_config
from omni_rl.cli import main
from omni_rl.errors import ConfigError

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_flow_dppo.toml"  # rollout steps = 10
CPS_ON_LAST = ('sampler.name="cps"', 'sampler.options={window_size = 2, window_range = [8, 10], window_mode = "fixed"}')


def test_the_example_passes_check() -> None:
    assert main(["check", str(EXAMPLE)]) == 0


@pytest.mark.parametrize("kl", ["0.0", "0.04"])
def test_cps_on_the_last_step_is_refused_with_the_option_and_the_fix(kl: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(EXAMPLE, [*CPS_ON_LAST, f"loss.options.kl_coef={kl}"])
    assert (
        "  - invalid value: sampler 'cps' with loss 'flow_dppo': its SDE window (window_size = 2, window_range = "
        "[8, 10], fixed) can include the last of the 10 rollout steps, where cps has s = sigma' * sin(eta * pi / 2) "
        "= 0 and the trust region's KL divides by 2 s^2 (0/0); set $.sampler.options.window_range = [7, 9] "
        "(hi <= 9), or the flow_sde sampler @ $.sampler.options.window_range"
    ) in str(info.value)


@pytest.mark.parametrize(
    "sets",
    [
        (),
        ("loss.options.kl_coef=0.04",),
        ('sampler.name="cps"', "sampler.options={window_size = 2, window_range = [0, 2]}", "loss.options.kl_coef=0.04"),
        ('sampler.name="cps"', "sampler.options={window_size = 0}"),  # every step but the last
        ('sampler.name="cps"', "sampler.options={window_size = 2, window_range = [8, 10], noise_level = 0.0}"),
        ("sampler.options.window_range=[8, 10]", 'sampler.options.window_mode="fixed"', "loss.options.kl_coef=0.04"),
    ],
    ids=["example", "kl", "cps-kl", "cps-all-but-last", "cps-no-noise", "flow-sde-last-step"],
)
def test_what_the_math_allows_loads(sets: tuple[str, ...]) -> None:
    assert load_config(EXAMPLE, list(sets)).components["loss"].name == "flow_dppo"
