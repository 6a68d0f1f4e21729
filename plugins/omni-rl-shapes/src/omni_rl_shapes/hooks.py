"""Hook implementations of omni-rl-shapes: the ``shapes`` reward, the ``shapes_motion`` clip reward, the
``shapes_edit`` edit reward and the ``shapes`` and ``shapes_edit`` benchmarks of ``omni-rl eval``.

Imports only attrs-level modules at import time; the verifier (numpy) loads when the reward is built.
"""

from __future__ import annotations

from typing import Any

from omni_rl import BenchmarkSpec, RewardSpec, hookimpl
from omni_rl_shapes.config import ShapesRewardConfig
from omni_rl_shapes.edit.config import ShapesEditBenchmarkConfig, ShapesEditRewardConfig
from omni_rl_shapes.motion.config import ShapesMotionRewardConfig


def _build_shapes_reward(config: ShapesRewardConfig, ctx: Any) -> Any:
    from omni_rl_shapes.reward import ShapesReward

    return ShapesReward(config)


def _build_shapes_motion_reward(config: ShapesMotionRewardConfig, ctx: Any) -> Any:
    from omni_rl_shapes.motion.reward import ShapesMotionReward

    return ShapesMotionReward(config)


def _build_shapes_edit_reward(config: ShapesEditRewardConfig, ctx: Any) -> Any:
    from omni_rl_shapes.edit.reward import ShapesEditReward

    return ShapesEditReward(config)


def _build_shapes_edit_benchmark(config: ShapesEditBenchmarkConfig, ctx: Any) -> Any:
    from omni_rl_shapes.edit.benchmark import build_shapes_edit_benchmark

    return build_shapes_edit_benchmark(config, ctx)


def _build_shapes_benchmark(config: ShapesRewardConfig, ctx: Any) -> Any:
    from omni_rl_shapes.benchmark import build_shapes_benchmark

    return build_shapes_benchmark(config, ctx)


@hookimpl
def omni_rl_benchmarks() -> list[BenchmarkSpec]:
    return [
        BenchmarkSpec(
            name="shapes",
            factory=_build_shapes_benchmark,
            config=ShapesRewardConfig,
            summary="shapes val set: 48 prompts x 2 images scored by the shapes verifier; overall = the val "
            "reward the shipped pipelines record",
        ),
        BenchmarkSpec(
            name="shapes_edit",
            factory=_build_shapes_edit_benchmark,
            config=ShapesEditBenchmarkConfig,
            summary="shapes edit val set: 48 source images + instructions x 2 edits scored by the shapes_edit "
            "reward; per edit kind and overall",
        ),
    ]


@hookimpl
def omni_rl_reward_models() -> list[RewardSpec]:
    return [
        RewardSpec(
            name="shapes",
            factory=_build_shapes_reward,
            config=ShapesRewardConfig,
            summary="GenEval-style rule-based check of shapes images (color, count, shape, position) in [0, 1]",
        ),
        RewardSpec(
            name="shapes_motion",
            factory=_build_shapes_motion_reward,
            config=ShapesMotionRewardConfig,
            summary="shapes in motion: clips (N, F, H, W, 3) checked per frame, for motion and for temporal "
            "consistency, in [0, 1]",
        ),
        RewardSpec(
            name="shapes_edit",
            factory=_build_shapes_edit_reward,
            config=ShapesEditRewardConfig,
            summary="shapes edits: the verifier on what the instruction changes x preservation of what it does not "
            "(edit, preserve, strict), in [0, 1]; reads the source image",
        ),
    ]
