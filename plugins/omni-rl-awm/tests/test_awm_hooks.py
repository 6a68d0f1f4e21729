"""Discovery: the entry point, the hooks' records, and the preset's values."""

from __future__ import annotations

import importlib.metadata

import cattrs
from omni_rl_awm import hooks
from omni_rl_awm.config import AWMLossConfig

from omni_rl.context import BuildContext
from omni_rl.protocols import Loss


def test_entry_point_points_at_hooks() -> None:
    eps = importlib.metadata.entry_points(group="omni_rl")
    assert "omni_rl_awm.hooks" in {ep.value for ep in eps}


def _named(specs: list, name: str):
    (spec,) = [spec for spec in specs if spec.name == name]
    return spec


def test_component_names() -> None:
    """AWM and the two ELBO losses that share its draws (elbo_pg, v_grpo), each with its preset."""
    assert [spec.name for spec in hooks.omni_rl_losses()] == ["awm", "elbo_pg", "v_grpo"]
    assert [spec.name for spec in hooks.omni_rl_algorithms()] == ["awm", "elbo_pg", "v_grpo"]


def test_factory_builds_a_forward_loss() -> None:
    spec = _named(hooks.omni_rl_losses(), "awm")
    loss = spec.factory(spec.config(), BuildContext())
    assert isinstance(loss, Loss)
    assert loss.requirements.inputs == "forward"
    for hook in ("setup", "before_update", "after_optimizer_step"):
        assert callable(getattr(loss, hook)), hook


def test_preset_is_the_reference_recipe() -> None:
    preset = _named(hooks.omni_rl_algorithms(), "awm")
    defaults = preset.defaults
    assert set(defaults) == {"sampler", "rollout", "advantage", "loss", "optim"}
    assert defaults["sampler"] == {"name": "ode", "options": {}}
    assert defaults["rollout"] == {"name": "diffusers", "options": {"group_size": 8, "steps": 14, "cfg": 1.0}}
    assert defaults["optim"] == {"lr": 3e-4}
    strict = cattrs.Converter(forbid_extra_keys=True)  # as the config loader: unknown keys are errors
    loss = strict.structure(defaults["loss"]["options"], AWMLossConfig)
    assert (loss.weighting, loss.ghuber_power, loss.timesteps) == ("ghuber", 0.25, 6)
    assert (loss.time_sampling, loss.schedule_steps, loss.schedule_skip_first, loss.schedule_fraction) == (
        "discrete",
        14,
        True,
        0.9,
    )
    assert loss.schedule_steps == defaults["rollout"]["options"]["steps"]  # trains the sampler's noise levels
    assert (loss.clip_ratio, loss.adv_clip_max, loss.advantage_max) == (1.0, 5.0, 1.0)
    assert (loss.kl_coef, loss.ema_coef, loss.ema_decay, loss.ema_decay_schedule) == (0.003, 1.0, 0.3, "linear")


def test_presets_are_fresh_copies() -> None:
    first = hooks.omni_rl_algorithms()[0].defaults
    first["loss"]["options"]["kl_coef"] = 99.0
    assert hooks.omni_rl_algorithms()[0].defaults["loss"]["options"]["kl_coef"] == 0.003
