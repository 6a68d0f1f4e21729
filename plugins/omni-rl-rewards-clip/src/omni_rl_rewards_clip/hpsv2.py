"""``hpsv2``: Human Preference Score v2.1 (Wu et al. 2023), an open_clip ViT-H-14 fine-tuned on HPD
v2 (docs/math.md#clip-based-rewards).

score = ê_img · ê_txt, the dot product of the normalised image and text features (HPSv2's own ``score``: no
logit scale). HPSv2 runs on open_clip, which imports torchvision at import time (and depends on timm, which
needs it too); torchvision is not installable next to this project's torch build, so the checkpoint is loaded
into transformers' CLIPModel instead: the same architecture, built from the config of
laion/CLIP-ViT-H-14-laion2B-s32B-b79K (the CLIP HPSv2 fine-tunes), with the tensors renamed one to one
(:mod:`openclip_keys`). Images are fitted into the square (longer side resized, zero padding) as HPSv2's
evaluation transform does, then normalised by that repo's CLIP image processor; prompts go through its CLIP
tokenizer (the same BPE vocabulary and 77-token context as open_clip's).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from omni_rl.errors import ConfigError
from omni_rl_rewards_clip.base import ModelReward
from omni_rl_rewards_clip.clip_model import LoadedClip, load_processor, place
from omni_rl_rewards_clip.config import HpsV2Config
from omni_rl_rewards_clip.images import letterbox
from omni_rl_rewards_clip.loading import load_or_explain, weight_file
from omni_rl_rewards_clip.openclip_keys import openclip_to_transformers, unwrap

if TYPE_CHECKING:
    from PIL import Image


class HpsV2Reward(ModelReward[HpsV2Config]):
    """No details: the score is the cosine itself."""

    name = "hpsv2"
    sources = ("model", "processor")

    def load(self) -> LoadedClip:
        import torch
        from transformers import CLIPConfig, CLIPModel

        config = self.config
        processor = load_processor(config.processor, reward=self.owner, option="processor")
        clip_config = load_or_explain(
            CLIPConfig.from_pretrained, config.processor, reward=self.owner, option="processor", what="CLIP config"
        )
        path = weight_file(config.model, config.filename, reward=self.owner, option="model")
        try:
            state = openclip_to_transformers(unwrap(torch.load(path, map_location="cpu", weights_only=True)))
            model = CLIPModel.from_pretrained(None, config=clip_config, state_dict=state)
        except (OSError, ValueError, RuntimeError, KeyError) as error:
            raise ConfigError(
                f"reward {self.name!r}: {path} ({self.owner.option('model')}) is not an HPSv2 checkpoint for the "
                f"CLIP config of {self.owner.option('processor')} = {config.processor!r}: {error}",
                hint="give the HPSv2 checkpoint (HPS_v2.1_compressed.pt from the hub repo xswu/HPSv2) and the "
                "CLIP ViT-H-14 it was trained from (laion/CLIP-ViT-H-14-laion2B-s32B-b79K)",
            ) from error
        unfilled = set(model.state_dict()) - set(state)
        if unfilled:
            raise ConfigError(
                f"reward {self.name!r}: {path} lacks {len(unfilled)} tensors of the CLIP model of "
                f"{config.processor!r}, e.g. {sorted(unfilled)[:4]}",
                hint="the checkpoint and the processor's CLIP config must be the same architecture (ViT-H-14)",
            )
        return place(model, processor, device=self.device, dtype=config.dtype)

    def score_chunk(
        self, loaded: LoadedClip, images: list[Image.Image], prompts: Sequence[str]
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        size = loaded.model.config.vision_config.image_size
        fitted = [letterbox(image, size) for image in images]
        scores = (loaded.image_embeddings(fitted) * loaded.text_embeddings(prompts)).sum(dim=-1)
        return scores.double().cpu().numpy(), {}


def build_hpsv2(config: HpsV2Config, ctx: Any) -> HpsV2Reward:
    """Factory of ``hpsv2``: checks local paths now, loads the weights on the first call."""
    return HpsV2Reward(config, ctx)
