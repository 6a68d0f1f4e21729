"""Hook implementations: the remote reward components. Only option classes are imported here."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import RewardSpec, hookimpl
from omni_rl_rewards_remote.checks import source_reward_check
from omni_rl_rewards_remote.config import HttpRewardConfig, VlmJudgeConfig

if TYPE_CHECKING:
    from omni_rl_rewards_remote.http_reward import HttpReward
    from omni_rl_rewards_remote.vlm_judge import VlmJudgeReward


def _build_vlm_judge(config: VlmJudgeConfig, ctx: Any) -> VlmJudgeReward:
    from omni_rl_rewards_remote.vlm_judge import build_vlm_judge

    return build_vlm_judge(config, ctx)


def _build_http(config: HttpRewardConfig, ctx: Any) -> HttpReward:
    from omni_rl_rewards_remote.http_reward import build_http

    return build_http(config, ctx)


@hookimpl
def omni_rl_reward_models() -> list[RewardSpec]:
    return [
        RewardSpec(
            name="vlm_judge",
            factory=_build_vlm_judge,
            config=VlmJudgeConfig,
            summary="a VLM behind an OpenAI-compatible API judges each image (alignment, quality, yes/no, OCR, edits)",
            check=source_reward_check,
        ),
        RewardSpec(
            name="http",
            factory=_build_http,
            config=HttpRewardConfig,
            summary="a reward scored by a reward server (omni-rl serve-reward) over its JSON protocol",
            check=source_reward_check,
        ),
    ]
