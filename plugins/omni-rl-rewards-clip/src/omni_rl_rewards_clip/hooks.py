"""Hook implementations: the model-based reward components of this plugin.

Only the option classes (attrs) are imported here; torch, transformers and huggingface_hub are imported inside
the factories (and the weights on the first call), so listing plugins stays fast and works without a GPU.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import RewardSpec, hookimpl
from omni_rl_rewards_clip.checks import source_reward_check
from omni_rl_rewards_clip.config import (
    AestheticConfig,
    ClipScoreConfig,
    HpsV2Config,
    ImageSimilarityConfig,
    PickScoreConfig,
)

if TYPE_CHECKING:
    from omni_rl_rewards_clip.aesthetic import AestheticReward
    from omni_rl_rewards_clip.clip_score import ClipScoreReward
    from omni_rl_rewards_clip.hpsv2 import HpsV2Reward
    from omni_rl_rewards_clip.image_similarity import ImageSimilarityReward
    from omni_rl_rewards_clip.pickscore import PickScoreReward


def _build_pickscore(config: PickScoreConfig, ctx: Any) -> PickScoreReward:
    from omni_rl_rewards_clip.pickscore import build_pickscore

    return build_pickscore(config, ctx)


def _build_clip_score(config: ClipScoreConfig, ctx: Any) -> ClipScoreReward:
    from omni_rl_rewards_clip.clip_score import build_clip_score

    return build_clip_score(config, ctx)


def _build_hpsv2(config: HpsV2Config, ctx: Any) -> HpsV2Reward:
    from omni_rl_rewards_clip.hpsv2 import build_hpsv2

    return build_hpsv2(config, ctx)


def _build_aesthetic(config: AestheticConfig, ctx: Any) -> AestheticReward:
    from omni_rl_rewards_clip.aesthetic import build_aesthetic

    return build_aesthetic(config, ctx)


def _build_image_similarity(config: ImageSimilarityConfig, ctx: Any) -> ImageSimilarityReward:
    from omni_rl_rewards_clip.image_similarity import build_image_similarity

    return build_image_similarity(config, ctx)


@hookimpl
def omni_rl_reward_models() -> list[RewardSpec]:
    return [
        RewardSpec(
            name="pickscore",
            factory=_build_pickscore,
            config=PickScoreConfig,
            summary="PickScore_v1: exp(logit_scale) * cos(image, prompt) / scale (26, as Flow-GRPO)",
        ),
        RewardSpec(
            name="clip_score",
            factory=_build_clip_score,
            config=ClipScoreConfig,
            summary="factor * cos(image, prompt) of any transformers CLIP (CLIP-S: factor 2.5, clamp_at_zero)",
        ),
        RewardSpec(
            name="hpsv2",
            factory=_build_hpsv2,
            config=HpsV2Config,
            summary="HPSv2.1: cos(image, prompt) of the HPS ViT-H-14 checkpoint (loaded into transformers' CLIP)",
        ),
        RewardSpec(
            name="aesthetic",
            factory=_build_aesthetic,
            config=AestheticConfig,
            summary="LAION improved aesthetic predictor: MLP on the normalised CLIP ViT-L/14 image embedding",
        ),
        RewardSpec(
            name="image_similarity",
            factory=_build_image_similarity,
            config=ImageSimilarityConfig,
            summary="edits: cos(output, source) of CLIP image features or a DINO CLS token (preservation only)",
            check=source_reward_check,
        ),
    ]
