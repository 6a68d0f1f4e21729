"""Discovery: the entry point, the records and the preset's values (structured as a config file's options are), and
``omni-rl plugins --components`` listing both; the hooks module imports no torch."""

from __future__ import annotations

import importlib.metadata
import json
import math
import subprocess
import sys

import cattrs
import pytest
from omni_rl_dance_grpo import hooks
from omni_rl_dance_grpo.config import DanceSDEConfig
from omni_rl_flow_grpo.config import FlowGRPOLossConfig, GRPOAdvantageConfig
from omni_rl_flow_grpo.samplers.window import sde_window, trained_positions

from omni_rl.cli import main


def test_entry_point_points_at_hooks() -> None:
    eps = importlib.metadata.entry_points(group="omni_rl")
    assert "omni_rl_dance_grpo.hooks" in {ep.value for ep in eps}


def test_the_plugin_provides_the_sampler_and_the_preset() -> None:
    assert [spec.name for spec in hooks.omni_rl_samplers()] == ["dance_sde"]
    assert [spec.name for spec in hooks.omni_rl_algorithms()] == ["dance_grpo"]
    assert sorted(name for name in dir(hooks) if name.startswith("omni_rl_")) == [
        "omni_rl_algorithms",
        "omni_rl_samplers",
    ]
    (sampler,) = hooks.omni_rl_samplers()
    assert sampler.config is DanceSDEConfig


def test_hooks_import_no_torch() -> None:
    code = "import sys, omni_rl_dance_grpo.hooks; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_preset_is_the_reference_recipe() -> None:
    (preset,) = hooks.omni_rl_algorithms()
    defaults = preset.defaults
    assert set(defaults) == {"sampler", "advantage", "loss", "rollout"}
    names = (defaults[k]["name"] for k in ("sampler", "advantage", "loss", "rollout"))
    assert tuple(names) == ("dance_sde", "grpo", "flow_grpo", "diffusers")
    strict = cattrs.Converter(forbid_extra_keys=True)  # as the config loader: unknown keys are errors
    sampler = strict.structure(defaults["sampler"]["options"], DanceSDEConfig)
    assert (sampler.noise_level, sampler.window_size, sampler.timestep_fraction) == (0.3, 0, 0.6)
    rollout = defaults["rollout"]["options"]
    assert rollout == {"group_size": 8, "steps": 10, "cfg": 4.5, "shared_initial_noise": True}
    # every step but the last is stochastic; each sample trains ceil(0.6 * 9) = 6 of them
    window = sde_window(sampler, 1, rollout["steps"], seed=0)
    assert window == range(0, 9)
    assert len(trained_positions(sampler, len(window), 1, 0, 123)) == 6 == math.ceil(0.6 * 9)
    advantage = strict.structure(defaults["advantage"]["options"], GRPOAdvantageConfig)
    assert (advantage.global_std, advantage.std_normalize, advantage.std_ddof) == (False, True, 1)
    assert advantage.aggregate == "advantage"
    loss = strict.structure(defaults["loss"]["options"], FlowGRPOLossConfig)
    assert (loss.clip_ratio, loss.adv_clip_max, loss.kl_coef) == (1e-4, 5.0, 0.0)


def test_presets_are_fresh_copies() -> None:
    first = hooks.omni_rl_algorithms()[0].defaults
    first["sampler"]["options"]["timestep_fraction"] = 0.1
    assert hooks.omni_rl_algorithms()[0].defaults["sampler"]["options"]["timestep_fraction"] == 0.6


def test_plugins_components_lists_the_sampler_and_the_preset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--components", "--json"]) == 0
    plugins = {p["distribution"]: p for p in json.loads(capsys.readouterr().out)}
    mine = plugins["omni-rl-dance-grpo"]
    assert mine["status"] == "active", mine["error"]
    assert sorted((c["kind"], c["name"]) for c in mine["components"]) == [
        ("algorithm", "dance_grpo"),
        ("sampler", "dance_sde"),
    ]
