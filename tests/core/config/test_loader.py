"""Config loading: two passes, presets, every problem at once with its $.path, the resolved file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import tomli
from core_toys import TOY_CONFIG, ToyLossConfig, ToyModelConfig, ToyPlugin, ToySamplerConfig

from omni_rl.config import load_config, resolve_config, resolved_toml, structure_options, write_resolved
from omni_rl.errors import ConfigError, PluginError
from omni_rl.registry import Registry
from omni_rl.testing import InlinePlugin, make_registry

WriteConfig = Callable[..., Path]


def _problems(exc: ConfigError) -> list[str]:
    return [line[4:] for line in exc.message.splitlines() if line.startswith("  - ")]


def test_a_valid_config_resolves_every_component(write_config: WriteConfig, toy_registry: Registry) -> None:
    config = load_config(write_config(TOY_CONFIG), registry=toy_registry)
    assert config.run.steps == 3 and config.run.seed == 7
    assert {kind: c.name for kind, c in config.components.items()} == {
        "model": "toy",
        "sampler": "toy_sde",
        "rollout": "toy_rollout",
        "advantage": "toy_grpo",
        "loss": "toy_ppo",
    }
    assert config.components["model"].options == ToyModelConfig(channels=4)
    assert [(r.name, r.weight, r.on_error) for r in config.rewards] == [("toy_brightness", 2.0, "raise")]
    assert config.plugin_versions[1:] == ["omni-rl-toys==0.3"]
    assert config.plugin_versions[0].startswith("omni-rl==")


def test_preset_fills_absent_sections_and_merges_options_under_the_users(
    write_config: WriteConfig, toy_registry: Registry
) -> None:
    config = load_config(write_config(TOY_CONFIG), registry=toy_registry)
    # [loss] without a name takes the preset's, its options merged over the preset's
    assert config.components["loss"].options == ToyLossConfig(clip_ratio=0.1, kl_coef=0.04)
    assert config.components["sampler"].options == ToySamplerConfig(noise_level=0.5)
    # optim: preset keys fill what the file leaves out
    assert (config.optim.lr, config.optim.micro_batch) == (3e-4, 2)


def test_a_users_section_with_an_alias_of_the_presets_component_is_merged(
    write_config: WriteConfig, toy_registry: Registry
) -> None:
    text = TOY_CONFIG + '\n[sampler]\nname = "toy_sampler"\noptions = { window = 3 }\n'
    config = load_config(write_config(text), registry=toy_registry)
    assert config.components["sampler"].name == "toy_sde"
    assert config.components["sampler"].options == ToySamplerConfig(noise_level=0.5, window=3)


def test_a_users_section_naming_another_component_replaces_the_presets(
    write_config: WriteConfig, toy_registry: Registry
) -> None:
    class Extra:
        from omni_rl import SamplerSpec, hookimpl

        @hookimpl
        def omni_rl_samplers(self) -> list[object]:
            return [self.SamplerSpec(name="other_sde", factory=lambda c, ctx: None, config=ToySamplerConfig)]

    registry = make_registry(InlinePlugin(ToyPlugin(), "toys", "1"), InlinePlugin(Extra(), "extra", "1"))
    text = TOY_CONFIG + '\n[sampler]\nname = "other_sde"\n'
    config = load_config(write_config(text), registry=registry)
    assert config.components["sampler"].name == "other_sde"
    assert config.components["sampler"].options == ToySamplerConfig(), "no preset options leak into another sampler"


def test_overrides_apply_before_the_preset(write_config: WriteConfig, toy_registry: Registry) -> None:
    config = load_config(
        write_config(TOY_CONFIG),
        ["loss.options.kl_coef=0.5", "sampler.options.window=1", "run.steps=9", "reward.0.weight=0.5"],
        registry=toy_registry,
    )
    assert config.components["loss"].options == ToyLossConfig(clip_ratio=0.1, kl_coef=0.5)
    assert config.components["sampler"].options == ToySamplerConfig(noise_level=0.5, window=1)
    assert (config.run.steps, config.rewards[0].weight) == (9, 0.5)


def test_problems_in_three_sections_are_reported_together(write_config: WriteConfig, toy_registry: Registry) -> None:
    text = (
        TOY_CONFIG.replace("steps = 3", 'steps = "three"').replace("clip_ratio = 0.1", 'clip_ratio = "big"')
        + "\n[optim]\nlr = -1.0\nbetaz = [0.9, 0.99]\n"
        + '\n[advantage]\nname = "toy_grpo"\noptions = { eps = "small" }\n'
    )
    path = write_config(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, registry=toy_registry)
    assert caught.value.message.splitlines() == [
        f"invalid config {path} (5 problems):",
        "  - invalid value for type, expected int @ $.run.steps",
        "  - invalid value for type, expected float @ $.loss.options.clip_ratio",
        "  - invalid value: lr must be a finite number > 0, got -1.0 @ $.optim.lr",
        "  - unknown key 'betaz' (did you mean 'betas'?) @ $.optim",
        "  - invalid value for type, expected float @ $.advantage.options.eps",
    ]
    assert caught.value.exit_code == 2


def test_unknown_components_and_options_in_one_error(write_config: WriteConfig, toy_registry: Registry) -> None:
    text = """
[model]
name = "tyo"

[sampler]
name = "toy_sde"
options = { noise_levl = 0.3 }

[rollout]
name = "toy_rollout"

[advantage]
name = "toy_grpo"

[loss]
name = "toy_ppo"
options = { clip_ratio = 0 }

[[reward]]
name = "toy_brightness"
on_error = "ignore"
"""
    path = write_config(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path, registry=toy_registry)
    assert caught.value.message.splitlines() == [
        f"invalid config {path} (4 problems):",
        "  - unknown model 'tyo'; did you mean 'toy'? available: toy @ $.model.name",
        "  - unknown key 'noise_levl' (did you mean 'noise_level'?) @ $.sampler.options",
        "  - invalid value: must be > 0, got 0.0 @ $.loss.options.clip_ratio",
        "  - invalid value: expected one of 'raise', 'zero', got 'ignore' @ $.reward[0].on_error",
    ]
    assert "`omni-rl plugins --components` lists the installed components" in caught.value.hint


def test_missing_sections_without_a_preset(write_config: WriteConfig, toy_registry: Registry) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config('[model]\nname = "toy"\n[loss]\nname = "toy_ppo"\n'), registry=toy_registry)
    assert _problems(caught.value) == [
        "missing section [sampler] (and no [algorithm] preset fills it) @ $.sampler",
        "missing section [rollout] (and no [algorithm] preset fills it) @ $.rollout",
        "missing section [advantage] (and no [algorithm] preset fills it) @ $.advantage",
        "missing section [[reward]]: at least one reward is required (and no [algorithm] preset fills it) @ $.reward",
    ]
    assert caught.value.hint.endswith(
        "add the missing sections, or an [algorithm] preset that fills them (presets: toy_grpo_preset)"
    )


def test_missing_model_is_reported_once(write_config: WriteConfig, toy_registry: Registry) -> None:
    text = '[algorithm]\nname = "toy_grpo_preset"\n[[reward]]\nname = "toy_brightness"\n'
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text), registry=toy_registry)
    assert _problems(caught.value) == [
        "missing section [model] (algorithm 'toy_grpo_preset' does not fill it) @ $.model"
    ]


def test_unknown_algorithm(write_config: WriteConfig, toy_registry: Registry) -> None:
    text = TOY_CONFIG.replace('name = "toy_grpo_preset"', 'name = "toy_grpo_prest"')
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text), registry=toy_registry)
    assert _problems(caught.value) == [
        "unknown algorithm 'toy_grpo_prest'; did you mean 'toy_grpo_preset'? available: toy_grpo_preset"
        " @ $.algorithm.name"
    ]


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ("[run]\nsteps = true", "invalid value for type, expected int @ $.run.steps"),
        ("[run]\nseed = 1.5", "invalid value for type, expected int @ $.run.seed"),
        ('[optim]\nlr = "1e-4"', "invalid value for type, expected float @ $.optim.lr"),
        ('[log]\nbackends = "console"', "invalid value: expected an array, got a string @ $.log.backends"),
        ("[optim]\nbetas = [0.9]", "invalid value: expected an array of 2 values, got 1 value @ $.optim.betas"),
        ("[cluster]\naddress = 1", "invalid value for type, expected str @ $.cluster.address"),
        ('[run]\neval_before_training = "no"', "invalid value for type, expected bool @ $.run.eval_before_training"),
        ("run = 3", "invalid value: expected a table, got an integer @ $.run"),
        ("[bogus]\nx = 1", "unknown key 'bogus' @ $"),
    ],
)
def test_values_are_typed_like_toml(
    write_config: WriteConfig, toy_registry: Registry, section: str, problem: str
) -> None:
    text = section + "\n" + TOY_CONFIG.replace("[run]\nsteps = 3\nseed = 7\n", "")
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text), registry=toy_registry)
    assert _problems(caught.value) == [problem]


def test_an_unknown_video_format_names_the_path_and_the_choices(
    write_config: WriteConfig, toy_registry: Registry
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config('[log]\nvideo_format = "avi"\n' + TOY_CONFIG), registry=toy_registry)
    assert _problems(caught.value) == [
        "invalid value: unknown video format 'avi'; available: auto, mp4, webp, gif @ $.log.video_format"
    ]


def test_a_validator_and_a_type_error_in_one_section_are_both_reported(
    write_config: WriteConfig, toy_registry: Registry
) -> None:
    text = TOY_CONFIG.replace("steps = 3\nseed = 7", 'steps = -1\nseed = "x"')
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text), registry=toy_registry)
    assert _problems(caught.value) == [
        "invalid value for type, expected int @ $.run.seed",
        "invalid value: steps must be an integer between 1 and 10,000,000, got -1 @ $.run.steps",
    ]


def test_plugin_conflicts_stop_loading(write_config: WriteConfig, toy_plugin: InlinePlugin) -> None:
    registry = make_registry(toy_plugin, InlinePlugin(ToyPlugin(), "omni-rl-toys-fork", "9.9", name="fork"))
    with pytest.raises(PluginError, match=r"is provided by both omni-rl-toys 0\.3 and omni-rl-toys-fork 9\.9"):
        load_config(write_config(TOY_CONFIG), registry=registry)


def test_resolved_config_round_trips_through_the_run_directory(
    write_config: WriteConfig, toy_registry: Registry, tmp_run_dir: Path
) -> None:
    config = load_config(write_config(TOY_CONFIG), ["loss.options.mode=plain"], registry=toy_registry)
    config_path, plugins_path = write_resolved(config, tmp_run_dir)
    assert config_path == tmp_run_dir / "config.resolved.toml"
    assert plugins_path.read_text().splitlines() == config.plugin_versions
    text = config_path.read_text()
    assert (
        '[[reward]]\nname = "toy_brightness"\nweight = 2.0\non_error = "raise"\nmax_invalid_steps = 5\n\n'
        "[reward.options]\nscale = 1.0\n" in text
    )
    document = tomli.loads(text)
    assert document["loss"] == {
        "name": "toy_ppo",
        "options": {"clip_ratio": 0.1, "kl_coef": 0.04, "mode": "plain"},
    }
    assert document["sampler"] == {"name": "toy_sde", "options": {"noise_level": 0.5, "window": 2}}
    assert document["algorithm"] == {"name": "toy_grpo_preset"}
    assert document["optim"]["betas"] == [0.9, 0.999]
    reloaded = load_config(config_path, registry=toy_registry)
    assert reloaded == config
    assert resolved_toml(reloaded) == resolved_toml(config)


def test_resolve_config_takes_a_parsed_dict(toy_registry: Registry) -> None:
    raw = {
        "model": {"name": "toy"},
        "algorithm": {"name": "toy_grpo_preset"},
        "reward": [{"name": "toy_brightness"}],
    }
    assert resolve_config(raw, toy_registry).components["rollout"].name == "toy_rollout"


def test_structure_options_reports_every_problem_with_paths(toy_registry: Registry) -> None:
    spec = toy_registry.get("loss", "toy_ppo")
    with pytest.raises(ConfigError) as caught:
        structure_options(spec, {"clip_ratio": "x", "kl_coef": -1, "extra": 1})
    assert caught.value.message.splitlines() == [
        "invalid options for loss 'toy_ppo' (3 problems):",
        "  - invalid value for type, expected float @ $.loss.options.clip_ratio",
        "  - invalid value: 'kl_coef' must be >= 0: -1.0 @ $.loss.options.kl_coef",
        "  - unknown key 'extra' @ $.loss.options",
    ]
    assert structure_options(spec, ToyLossConfig(mode="x")) == ToyLossConfig(mode="x")


def test_an_unknown_component_named_by_the_preset_says_so(write_config: WriteConfig) -> None:
    from omni_rl import AlgorithmSpec, hookimpl

    class Preset:
        @hookimpl
        def omni_rl_algorithms(self) -> list[AlgorithmSpec]:
            return [AlgorithmSpec(name="needs_diffusers", defaults={"rollout": {"name": "diffusers"}})]

    registry = make_registry(InlinePlugin(ToyPlugin(), "toys", "1"), InlinePlugin(Preset(), "preset-dist", "2.0"))
    text = TOY_CONFIG.replace("toy_grpo_preset", "needs_diffusers").replace("[loss]\n", '[loss]\nname = "toy_ppo"\n')
    text += '[sampler]\nname = "toy_sde"\n[advantage]\nname = "toy_grpo"\n'
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text), registry=registry)
    assert _problems(caught.value) == [
        "unknown rollout 'diffusers'; available: toy_rollout (from algorithm 'needs_diffusers', preset-dist 2.0)"
        " @ $.rollout.name"
    ]
