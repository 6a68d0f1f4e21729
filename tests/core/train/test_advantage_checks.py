"""A third-party advantage estimator's output is checked (issue 33, item 6): a raise, a wrong shape, a non-float
dtype, a non-tensor or a non-finite value stop the trainer's step with a RuntimeFailure naming ``$.advantage``,
the component and its plugin, before anything reaches the update. The trainer runs on a stand-in worker group
(no Ray), with the estimator installed as a plugin of its own distribution."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from core_toys import TOY_CONFIG, ToyPlugin

from omni_rl.config import load_config
from omni_rl.engine.stepping import UpdateStats
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.hookspecs import hookimpl
from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.specs import AdvantageSpec
from omni_rl.testing import InlinePlugin, make_registry
from omni_rl.train.advantage_checks import CheckedEstimator, check_advantages
from omni_rl.train.trainer import Trainer

#: what each bad estimator returns for rewards r (N samples), and the message the step must fail with
BAD_OUTPUTS: dict[str, tuple[Callable[[torch.Tensor], Any], str]] = {
    "raises": (lambda r: 1 / 0, r"raised ZeroDivisionError: division by zero"),
    "nan": (lambda r: r - r + float("nan"), r"returned 8 non-finite advantage\(s\) of 8"),
    "short": (lambda r: r[:-1] - r.mean(), r"shape \(7,\) for 8 samples; expected \(8,\)"),
    "double_length": (lambda r: torch.cat([r, r]), r"shape \(16,\) for 8 samples"),
    "column": (lambda r: r[:, None], r"shape \(8, 1\) for 8 samples"),
    "int64": (lambda r: torch.zeros(len(r), dtype=torch.int64), r"returned torch.int64 advantages"),
    "none": (lambda r: None, r"returned NoneType, not a tensor of 8 advantages"),
    "text": (lambda r: "0.5", r"returned str, not a tensor"),
}


class StandInGroup:
    """The worker group: seeded images; remembers whether an update was made."""

    def __init__(self) -> None:
        self.updated = False

    def rollout(self, request: RolloutRequest) -> RolloutOutcome:
        images = np.stack(
            [np.random.default_rng(s).integers(0, 256, size=(8, 8, 3), dtype=np.uint8) for s in request.seeds]
        )
        return RolloutOutcome(images=images, prompts=request.prompts, group_ids=np.asarray(request.group_ids))

    def update(self, advantages: np.ndarray, extras: dict, step: int, rewards: np.ndarray, group_ids: list) -> list:
        self.updated = True
        return [UpdateStats(lr=0.0)]


class ThirdPartyPlugin:
    """``acme.adv``: returns what ``BAD_OUTPUTS[kind]`` says."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    @hookimpl
    def omni_rl_advantage_estimators(self) -> list[AdvantageSpec]:
        make = BAD_OUTPUTS[self.kind][0] if self.kind in BAD_OUTPUTS else (lambda r: r - r.mean())
        return [AdvantageSpec(name="acme.adv", factory=lambda c, ctx: lambda r, g: make(r), summary="third party")]


def _trainer(write_config: Callable[..., Path], tmp_path: Path, kind: str) -> Trainer:
    registry = make_registry(
        InlinePlugin(ToyPlugin(), "omni-rl-toys", "1"), InlinePlugin(ThirdPartyPlugin(kind), "acme-advantages", "2.1")
    )
    registry.validate()
    (tmp_path / "train.txt").write_text("t1\nt2\n")
    text = TOY_CONFIG + (
        f'\n[advantage]\nname = "acme.adv"\n\n[data]\ntrain = "{tmp_path / "train.txt"}"\n'
        "\n[rollout]\noptions = { group_size = 4 }\n"
    )
    return Trainer(load_config(write_config(text), registry=registry))


@pytest.mark.parametrize("kind", sorted(BAD_OUTPUTS))
def test_a_bad_estimator_stops_the_step_naming_the_section_and_the_plugin(
    kind: str, write_config: Callable[..., Path], tmp_path: Path
) -> None:
    trainer = _trainer(write_config, tmp_path, kind)
    group = StandInGroup()
    with pytest.raises(RuntimeFailure, match=BAD_OUTPUTS[kind][1]) as caught:
        trainer.train_step(group, 1, tmp_path)  # type: ignore[arg-type]
    assert "advantage 'acme.adv' ($.advantage, plugin acme-advantages 2.1)" in caught.value.message
    assert not group.updated  # nothing reached the update


def test_a_good_estimator_trains_through_the_check(write_config: Callable[..., Path], tmp_path: Path) -> None:
    trainer = _trainer(write_config, tmp_path, "good")
    group = StandInGroup()
    metrics = trainer.train_step(group, 1, tmp_path)  # type: ignore[arg-type]
    assert group.updated and np.isfinite(metrics["advantage/abs_mean"])


def test_numpy_output_is_accepted_as_float32_and_the_plugins_own_errors_pass_through() -> None:
    out = check_advantages(np.array([0.5, -0.5]), 2, "advantage 'x'")
    assert out.dtype == torch.float32 and out.tolist() == [0.5, -0.5]

    def readable(rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
        raise ConfigError("groups of 1 have no spread @ $.advantage.options.x")

    with pytest.raises(ConfigError, match="groups of 1"):
        CheckedEstimator(readable)(torch.zeros(2), torch.zeros(2))


def test_the_wrapper_keeps_the_estimators_other_members() -> None:
    class Aggregating:
        def __call__(self, rewards: torch.Tensor, group_ids: torch.Tensor) -> torch.Tensor:
            return rewards

        def reward_aggregation(self) -> str:
            return "advantage"

    assert CheckedEstimator(Aggregating()).reward_aggregation() == "advantage"
