"""Discovery: the entry point, the hooks' records, `omni-rl plugins --components`, and the preset's values."""

from __future__ import annotations

import importlib.metadata
import json

import cattrs
import pytest
from omni_rl_grpo_guard import hooks
from omni_rl_grpo_guard.config import GRPOGuardLossConfig

from omni_rl.cli import main
from omni_rl.context import BuildContext
from omni_rl.protocols import Loss


def test_entry_point_points_at_hooks() -> None:
    eps = importlib.metadata.entry_points(group="omni_rl")
    assert "omni_rl_grpo_guard.hooks" in {ep.value for ep in eps}


def test_component_names() -> None:
    assert [spec.name for spec in hooks.omni_rl_losses()] == ["grpo_guard"]
    assert [spec.name for spec in hooks.omni_rl_algorithms()] == ["grpo_guard"]


def test_plugins_components_lists_the_loss_and_the_preset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "--components", "--json"]) == 0
    (entry,) = [p for p in json.loads(capsys.readouterr().out) if p["distribution"] == "omni-rl-grpo-guard"]
    assert entry["status"] == "active"
    assert {(c["kind"], c["name"]) for c in entry["components"]} == {
        ("loss", "grpo_guard"),
        ("algorithm", "grpo_guard"),
    }


@pytest.mark.parametrize(
    ("kl_coef", "views"), [(0.0, {"current", "old"}), (0.04, {"current", "old", "reference"})], ids=["no-kl", "kl"]
)
def test_factory_builds_a_trajectory_loss_with_the_old_view(kl_coef: float, views: set[str]) -> None:
    (spec,) = hooks.omni_rl_losses()
    loss = spec.factory(spec.config(kl_coef=kl_coef), BuildContext())
    assert isinstance(loss, Loss)
    assert loss.requirements.inputs == "trajectory"
    assert loss.requirements.views == frozenset(views)


def test_preset_is_flow_grpo_fast_with_the_guard_loss() -> None:
    (preset,) = hooks.omni_rl_algorithms()
    defaults = preset.defaults
    assert set(defaults) == {"sampler", "advantage", "loss", "rollout"}
    assert defaults["sampler"] == {
        "name": "flow_sde",
        "options": {"noise_level": 0.7, "window_size": 2, "window_range": [0, 5], "window_mode": "random"},
    }
    assert defaults["rollout"] == {"name": "diffusers", "options": {"group_size": 8, "steps": 10, "cfg": 4.5}}
    assert defaults["advantage"]["name"] == "grpo"
    strict = cattrs.Converter(forbid_extra_keys=True)  # as the config loader: unknown keys are errors
    loss = strict.structure(defaults["loss"]["options"], GRPOGuardLossConfig)
    assert loss == GRPOGuardLossConfig(clip_ratio=2e-6, adv_clip_max=5.0, kl_coef=0.0, step_reweight=True)
    assert loss == GRPOGuardLossConfig()  # the option defaults are the preset's


def test_presets_are_fresh_copies() -> None:
    first = hooks.omni_rl_algorithms()[0].defaults
    first["loss"]["options"]["clip_ratio"] = 99.0
    assert hooks.omni_rl_algorithms()[0].defaults["loss"]["options"]["clip_ratio"] == 2e-6


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"clip_ratio": 0.0}, "clip_ratio must be a finite number > 0"),
        ({"adv_clip_max": -1.0}, "adv_clip_max must be a finite number > 0"),
        ({"kl_coef": -0.1}, "kl_coef must be a finite number >= 0"),
        ({"step_reweight": "yes"}, "'step_reweight' must be <class 'bool'>"),
    ],
)
def test_invalid_options_name_the_option(options: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        GRPOGuardLossConfig(**options)
