"""Discovery: the entry point, the preset's record and values (structured as a config file's options are), and
``omni-rl plugins --components`` listing it."""

from __future__ import annotations

import importlib.metadata
import json

import cattrs
import pytest
from omni_rl_flow_grpo.config import FlowGRPOLossConfig, FlowSDEConfig, GRPOAdvantageConfig
from omni_rl_flow_grpo.samplers.window import sde_window
from omni_rl_mix_grpo import hooks

from omni_rl.cli import main


def test_entry_point_points_at_hooks() -> None:
    eps = importlib.metadata.entry_points(group="omni_rl")
    assert "omni_rl_mix_grpo.hooks" in {ep.value for ep in eps}


def test_the_plugin_provides_only_the_preset() -> None:
    assert [spec.name for spec in hooks.omni_rl_algorithms()] == ["mix_grpo"]
    assert [name for name in dir(hooks) if name.startswith("omni_rl_")] == ["omni_rl_algorithms"]


def test_preset_is_the_reference_recipe() -> None:
    (preset,) = hooks.omni_rl_algorithms()
    defaults = preset.defaults
    assert set(defaults) == {"sampler", "advantage", "loss", "rollout"}
    assert (defaults["sampler"]["name"], defaults["advantage"]["name"], defaults["loss"]["name"]) == (
        "flow_sde",
        "grpo",
        "flow_grpo",
    )
    strict = cattrs.Converter(forbid_extra_keys=True)  # as the config loader: unknown keys are errors
    sampler = strict.structure(defaults["sampler"]["options"], FlowSDEConfig)
    assert (sampler.noise_level, sampler.window_size, sampler.window_mode) == (0.7, 4, "progressive")
    assert (sampler.iters_per_group, sampler.window_stride, sampler.ode_solver) == (25, 1, "dpm_solver_2m")
    rollout = defaults["rollout"]
    assert rollout == {
        "name": "diffusers",
        "options": {"group_size": 8, "steps": 8, "cfg": 4.5, "shared_initial_noise": True},
    }
    # the reference's window never covers the last two steps: range [0, steps - 2)
    assert sampler.window_range == (0, rollout["options"]["steps"] - 2)
    steps = rollout["options"]["steps"]
    assert [sde_window(sampler, t, steps, seed=0).start for t in (1, 25, 26, 51, 76, 1000)] == [0, 0, 1, 2, 2, 2]
    advantage = strict.structure(defaults["advantage"]["options"], GRPOAdvantageConfig)
    assert (advantage.global_std, advantage.std_normalize) == (False, True)  # the reference's per-group std
    loss = strict.structure(defaults["loss"]["options"], FlowGRPOLossConfig)
    assert (loss.clip_ratio, loss.adv_clip_max, loss.kl_coef) == (1e-4, 5.0, 0.0)


def test_presets_are_fresh_copies() -> None:
    first = hooks.omni_rl_algorithms()[0].defaults
    first["sampler"]["options"]["window_size"] = 99
    assert hooks.omni_rl_algorithms()[0].defaults["sampler"]["options"]["window_size"] == 4


def test_plugins_components_lists_the_preset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--components", "--json"]) == 0
    plugins = {p["distribution"]: p for p in json.loads(capsys.readouterr().out)}
    mine = plugins["omni-rl-mix-grpo"]
    assert mine["status"] == "active", mine["error"]
    assert [(c["kind"], c["name"]) for c in mine["components"]] == [("algorithm", "mix_grpo")]
