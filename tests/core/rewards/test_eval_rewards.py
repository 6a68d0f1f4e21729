"""``[[eval_reward]]``: rewards scored at validation only (val/<name>/mean and sub-scores), never trained on,
shown in the reward curve; and reward actors given GPUs build their model on cuda."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from core_toys import TOY_CONFIG

from omni_rl.config import load_config, resolved_toml
from omni_rl.config.toml import parse_toml_text
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.registry import Registry
from omni_rl.rewards.combined import CombinedReward, actor_context
from omni_rl.train.trainer import Trainer

WriteConfig = Callable[..., Path]
VALIDATED = "\n[run]\nsteps = 3\nseed = 7\neval_every = 1\n"
EVAL = '\n[[eval_reward]]\nname = "toy_brightness"\noptions = {}\n'


class BrightGroup:
    """A worker group whose val images are all white but one black."""

    def rollout(self, request: RolloutRequest) -> RolloutOutcome:
        n = len(request.prompts)
        images = np.full((n, 8, 8, 3), 255, dtype=np.uint8)
        images[0] = 0
        return RolloutOutcome(images=images, prompts=request.prompts, group_ids=np.asarray(request.group_ids))


def _config_text(tmp_path: Path, extra: str) -> str:
    (tmp_path / "train.txt").write_text("t1\nt2\n")
    (tmp_path / "val.txt").write_text("v1\nv2\nv3\nv4\n")
    base = TOY_CONFIG.replace("[run]\nsteps = 3\nseed = 7\n", VALIDATED)
    return base + f'\n[data]\ntrain = "{tmp_path / "train.txt"}"\nval = "{tmp_path / "val.txt"}"\n' + extra


def test_eval_rewards_resolve_apart_from_the_trained_ones(
    write_config: WriteConfig, toy_registry: Registry, tmp_path: Path
) -> None:
    config = load_config(write_config(_config_text(tmp_path, EVAL)), registry=toy_registry)
    assert [r.name for r in config.rewards] == ["toy_brightness"]
    assert [(r.name, r.on_error) for r in config.eval_rewards] == [("toy_brightness", "raise")]
    text = resolved_toml(config)
    assert "[[eval_reward]]" in text
    table = parse_toml_text(text)["eval_reward"][0]
    assert "weight" not in table and table["name"] == "toy_brightness"  # in no weighted sum
    again = load_config(write_config(text, "again.toml"), registry=toy_registry)
    assert again.raw == config.raw


def test_without_eval_rewards_the_resolved_file_has_no_such_section(
    write_config: WriteConfig, toy_registry: Registry, tmp_path: Path
) -> None:
    config = load_config(write_config(_config_text(tmp_path, "")), registry=toy_registry)
    assert config.eval_rewards == [] and "eval_reward" not in config.raw


def test_eval_reward_problems_are_reported_by_path(write_config: WriteConfig, toy_registry: Registry) -> None:
    text = TOY_CONFIG + '\n[[eval_reward]]\nname = "toy_brightnes"\nweight = 2.0\n'
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text), registry=toy_registry)
    message = caught.value.message
    assert "@ $.eval_reward[0].name" in message  # unknown, with the did-you-mean of every component name
    assert "unknown key 'weight'" in message  # an eval reward is in no weighted sum
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(TOY_CONFIG + EVAL, "no_val.toml"), registry=toy_registry)
    assert "validation is off" in caught.value.message and caught.value.message.endswith("@ $.eval_reward")


def test_validation_logs_eval_rewards_beside_the_trained_reward_and_the_curve_shows_them(
    write_config: WriteConfig, toy_registry: Registry, tmp_path: Path
) -> None:
    trainer = Trainer(load_config(write_config(_config_text(tmp_path, EVAL)), registry=toy_registry))
    metrics = trainer.validate(BrightGroup(), 2, tmp_path)  # type: ignore[arg-type]
    assert metrics["val/reward/mean"] == pytest.approx(2.0 * 0.75)  # the trained reward, weight 2
    assert metrics["val/toy_brightness/mean"] == pytest.approx(0.75)  # the eval reward, unweighted
    assert "val/mean" not in metrics and "val/std" not in metrics
    assert trainer.rewards.sections == trainer.config.rewards  # the eval reward is not trained on

    from omni_rl.reporting.reward_curve import plot_reward_curve

    rows = [{"step": 1, "reward/mean": 1.0, "perf/step_s": 1.0}, {"step": 2, **metrics, "perf/step_s": 1.0}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    import matplotlib.pyplot as plt

    shown: list[Any] = []
    close = plt.close
    plt.close = shown.append  # type: ignore[assignment]
    try:
        plot_reward_curve(tmp_path / "metrics.jsonl", tmp_path / "reward_curve.png")
    finally:
        plt.close = close  # type: ignore[assignment]
    titles = [ax.get_title() for ax in shown[0].axes]
    assert "toy_brightness (eval only)" in titles
    close(shown[0])


def test_a_reward_actor_given_gpus_builds_on_cuda() -> None:
    ctx = BuildContext(seed=3)
    assert actor_context(ctx, {}) is ctx
    assert actor_context(ctx, {"CPU": 2}) is ctx
    gpu = actor_context(ctx, {"GPU": 0.5})
    assert (gpu.device, gpu.seed) == ("cuda", 3)
    assert actor_context(None, {"GPU": 1}).device == "cuda"


def test_a_component_is_built_knowing_its_section(
    write_config: WriteConfig, toy_registry: Registry, tmp_path: Path
) -> None:
    """Each resolved section carries its config path, and its factory finds it in ``ctx.section`` (so a reward's
    errors can name ``$.eval_reward[0].options.x``); a failing eval reward's hint names its section and metric."""
    config = load_config(write_config(_config_text(tmp_path, EVAL)), registry=toy_registry)
    assert [r.path for r in config.rewards] == ["$.reward[0]"]
    assert [r.path for r in config.eval_rewards] == ["$.eval_reward[0]"]
    assert config.components["loss"].path == "$.loss"

    def raising(images: Any, prompts: Any, metadata: Any) -> Any:
        raise OSError("judge unreachable")

    seen: list[Any] = []
    spec = attrs.evolve(config.eval_rewards[0].spec, factory=lambda options, ctx: seen.append(ctx) or raising)
    section = attrs.evolve(config.eval_rewards[0], spec=spec)
    rewards = CombinedReward([section], BuildContext(seed=3))
    assert [(ctx.section, ctx.seed) for ctx in seen] == [("$.eval_reward[0]", 3)]
    with pytest.raises(RuntimeFailure) as caught:
        rewards(np.zeros((1, 2, 2, 3), dtype=np.uint8), ["a"], [{}])
    assert 'on_error = "zero" in $.eval_reward[0]' in caught.value.hint
    assert "val/toy_brightness/failures" in caught.value.hint


def test_validation_runs_every_n_steps_and_at_the_last_one(
    write_config: WriteConfig, toy_registry: Registry, tmp_path: Path
) -> None:
    """A run whose length eval_every does not divide still reports its final val reward (an 87-step run with
    val every 20 validates at 20, 40, 60, 80 and 87); eval_every 0 never validates during training."""
    text = (
        _config_text(tmp_path, "").replace("steps = 3\n", "steps = 87\n").replace("eval_every = 1", "eval_every = 20")
    )
    trainer = Trainer(load_config(write_config(text), registry=toy_registry))
    assert [step for step in range(1, 88) if trainer._validates_at(step)] == [20, 40, 60, 80, 87]
    off = Trainer(
        load_config(write_config(text.replace("eval_every = 20", "eval_every = 0"), "off.toml"), registry=toy_registry)
    )
    assert not any(off._validates_at(step) for step in range(1, 88))
