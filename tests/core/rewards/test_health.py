"""Rewards that fail under ``on_error = "zero"`` or score NaN are shown and, when they give nothing to train on for
``max_invalid_steps`` steps in a row, stop the run (issue 33, item 7); a reward that calls sys.exit is a failure
like any other. The trainer steps on a stand-in worker group (no Ray), so each step is milliseconds."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from core_toys import TOY_CONFIG, ToyPlugin
from rich.console import Console

from omni_rl.batch import RewardResult
from omni_rl.config import load_config
from omni_rl.engine.stepping import UpdateStats
from omni_rl.errors import RuntimeFailure
from omni_rl.hookspecs import hookimpl
from omni_rl.protocols import RolloutOutcome, RolloutRequest
from omni_rl.rewards.combined import ScoredBatch
from omni_rl.rewards.health import REPORT_EVERY, RewardHealth
from omni_rl.specs import RewardSpec
from omni_rl.testing import InlinePlugin, make_registry
from omni_rl.train.trainer import Trainer


@attrs.frozen(kw_only=True)
class MoodyConfig:
    #: "raise", "nan", "exit" or "ok"
    mood: str = "raise"


class Moody:
    def __init__(self, mood: str) -> None:
        self.mood = mood

    def __call__(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> RewardResult:
        if self.mood == "raise":
            raise ConnectionError("reward server at http://10.0.0.9:8000/x refused the connection")
        if self.mood == "exit":
            raise SystemExit(3)
        if self.mood == "nan":
            return RewardResult(scores=np.full(len(prompts), np.nan))
        return RewardResult(scores=np.ones(len(prompts)))


class MoodyPlugin:
    @hookimpl
    def omni_rl_reward_models(self) -> list[RewardSpec]:
        return [RewardSpec(name="moody", factory=lambda c, ctx: Moody(c.mood), config=MoodyConfig, summary="x")]


class StandInGroup:
    def rollout(self, request: RolloutRequest) -> RolloutOutcome:
        images = np.stack([np.full((8, 8, 3), s % 256, dtype=np.uint8) for s in request.seeds])
        return RolloutOutcome(images=images, prompts=request.prompts, group_ids=np.asarray(request.group_ids))

    def update(self, advantages: np.ndarray, extras: dict, step: int, rewards: np.ndarray, group_ids: list) -> list:
        return [UpdateStats(lr=0.0)]


def _trainer(write_config: Callable[..., Path], tmp_path: Path, section: str) -> tuple[Trainer, io.StringIO]:
    registry = make_registry(InlinePlugin(ToyPlugin(), "omni-rl-toys", "1"), InlinePlugin(MoodyPlugin(), "moody"))
    registry.validate()
    (tmp_path / "train.txt").write_text("t1\nt2\n")
    text = TOY_CONFIG + f'\n[data]\ntrain = "{tmp_path / "train.txt"}"\n\n[[reward]]\nname = "moody"\n{section}\n'
    out = io.StringIO()
    trainer = Trainer(load_config(write_config(text), registry=registry), Console(file=out, width=300))
    return trainer, out


def test_a_failing_reward_is_shown_then_stops_the_run_after_k_steps(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    trainer, out = _trainer(write_config, tmp_path, 'on_error = "zero"\nmax_invalid_steps = 3')
    for step in (1, 2):
        trainer.train_step(StandInGroup(), step, tmp_path)  # type: ignore[arg-type]
    shown = out.getvalue()
    assert "reward 'moody' ($.reward[1]) failed at step 1: ConnectionError: reward server at " in shown
    assert "refused the connection" in shown and shown.count("failed") == 1  # once, not every step
    with pytest.raises(RuntimeFailure) as caught:
        trainer.train_step(StandInGroup(), 3, tmp_path)  # type: ignore[arg-type]
    assert caught.value.message.startswith(
        "stopped at step 3: reward 'moody' gave no valid score for 3 consecutive steps (ConnectionError"
    )
    assert "max_invalid_steps in $.reward[1]" in caught.value.hint
    assert "resume with: omni-rl run" in caught.value.hint


def test_all_nan_scores_stop_the_run_even_with_on_error_raise(
    write_config: Callable[..., Path], tmp_path: Path
) -> None:
    trainer, out = _trainer(write_config, tmp_path, 'max_invalid_steps = 2\noptions = { mood = "nan" }')
    trainer.train_step(StandInGroup(), 1, tmp_path)  # type: ignore[arg-type]
    assert "no finite score (every score NaN or infinite)" in out.getvalue()
    with pytest.raises(RuntimeFailure, match="no valid score for 2 consecutive steps"):
        trainer.train_step(StandInGroup(), 2, tmp_path)  # type: ignore[arg-type]


def test_the_default_limit_stops_a_reward_that_always_fails(write_config: Callable[..., Path], tmp_path: Path) -> None:
    trainer, _ = _trainer(write_config, tmp_path, 'on_error = "zero"')
    with pytest.raises(RuntimeFailure, match="no valid score for 5 consecutive steps"):
        for step in range(1, 7):
            trainer.train_step(StandInGroup(), step, tmp_path)  # type: ignore[arg-type]
    assert step == 5


def test_a_reward_calling_sys_exit_is_a_named_failure(write_config: Callable[..., Path], tmp_path: Path) -> None:
    trainer, _ = _trainer(write_config, tmp_path, 'options = { mood = "exit" }')
    with pytest.raises(RuntimeFailure, match=r"reward 'moody' failed: SystemExit: 3 \(the reward called sys.exit\)"):
        trainer.train_step(StandInGroup(), 1, tmp_path)  # type: ignore[arg-type]


def test_max_invalid_steps_zero_never_stops(write_config: Callable[..., Path], tmp_path: Path) -> None:
    trainer, _ = _trainer(write_config, tmp_path, 'on_error = "zero"\nmax_invalid_steps = 0')
    for step in range(1, 8):
        trainer.train_step(StandInGroup(), step, tmp_path)  # type: ignore[arg-type]


def _batch(error: str = "", valid: int = 4) -> ScoredBatch:
    zeros = np.zeros(4)
    return ScoredBatch(
        total=zeros,
        scores={"r": zeros},
        details={"r": {}},
        failures={"r": 1} if error else {},
        valid={"r": valid},
        errors={"r": error} if error else {},
    )


def test_a_reward_that_keeps_failing_is_reminded_every_n_steps_and_one_valid_step_resets_the_count() -> None:
    section = attrs.make_class(
        "Section", {"path": attrs.field(default="$.reward[0]"), "max_invalid_steps": attrs.field(default=3)}
    )()
    health = RewardHealth([section], ["r"])
    printed = {step: health.observe(step, _batch("E1" if step % 2 else "E2", valid=4)) for step in range(1, 50)}
    reported = [step for step, lines in printed.items() if lines]
    assert reported == [1, 1 + REPORT_EVERY, 1 + 2 * REPORT_EVERY]
    assert printed[1 + REPORT_EVERY][0].startswith(
        f"reward 'r' ($.reward[0]) failed in {REPORT_EVERY} of the last {REPORT_EVERY} steps; latest: E1"
    )
    for step in (50, 51):
        health.observe(step, _batch("down", valid=0))
    health.observe(52, _batch())  # one valid step: the streak starts again
    health.observe(53, _batch("down", valid=0))
    assert health.invalid_streak["r"] == 1
