"""``aesthetic``: the LAION improved aesthetic predictor (Schuhmann, ``sac+logos+ava1-l14-linearMSE.pth``;
docs/math.md#clip-based-rewards).

score = MLP(ê_img), ê_img the L2-normalised CLIP ViT-L/14 image embedding; the MLP's raw output, about 1 to 10.
The MLP is 768 -> 1024 -> 128 -> 64 -> 16 -> 1 with dropout between the first layers and no activations (the
published ``linearMSE`` model), so its parameter names are ``layers.{0,2,4,6,7}``, which the weights file uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from omni_rl.errors import ConfigError
from omni_rl_rewards_clip.base import ModelReward
from omni_rl_rewards_clip.clip_model import LoadedClip, load_clip
from omni_rl_rewards_clip.config import AestheticConfig
from omni_rl_rewards_clip.loading import torch_dtype, weight_file

if TYPE_CHECKING:
    import torch
    from PIL import Image

#: hidden sizes and dropouts of the published predictor (its input size is the CLIP embedding size)
HIDDEN = (1024, 128, 64, 16)
DROPOUTS = (0.2, 0.2, 0.1)


def aesthetic_mlp(input_size: int) -> torch.nn.Sequential:
    """The predictor's architecture (random weights), laid out so the published state dict loads by name."""
    from torch import nn

    sizes = (input_size, *HIDDEN)
    layers: list[nn.Module] = []
    for k in range(len(HIDDEN)):
        layers.append(nn.Linear(sizes[k], sizes[k + 1]))
        if k < len(DROPOUTS):
            layers.append(nn.Dropout(DROPOUTS[k]))
    layers.append(nn.Linear(HIDDEN[-1], 1))
    return nn.Sequential(*layers)


@attrs.frozen
class LoadedAesthetic:
    """The CLIP image encoder and the MLP on the same device."""

    clip: LoadedClip
    mlp: Any


class AestheticReward(ModelReward[AestheticConfig]):
    """No details: the score is the predictor's output."""

    name = "aesthetic"
    sources = ("model", "predictor")

    def load(self) -> LoadedAesthetic:
        import torch

        config = self.config
        clip = load_clip(config.model, config.model, reward=self.owner, device=self.device, dtype=config.dtype)
        path = weight_file(config.predictor, config.predictor_file, reward=self.owner, option="predictor")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            mlp = aesthetic_mlp(clip.model.config.projection_dim)
            mlp.load_state_dict({key.removeprefix("layers."): value for key, value in state.items()})
        except (OSError, RuntimeError, ValueError, AttributeError, KeyError) as error:
            raise ConfigError(
                f"reward {self.name!r}: {path} ({self.owner.option('predictor')}) is not the aesthetic predictor's "
                f"MLP for the {clip.model.config.projection_dim}-d embeddings of {self.owner.option('model')} = "
                f"{config.model!r}: {error}",
                hint="use sac+logos+ava1-l14-linearMSE.pth (for openai/clip-vit-large-patch14)",
            ) from error
        mlp = mlp.to(device=self.device, dtype=torch_dtype(config.dtype)).eval().requires_grad_(False)
        return LoadedAesthetic(clip=clip, mlp=mlp)

    def score_chunk(
        self, loaded: LoadedAesthetic, images: list[Image.Image], prompts: Sequence[str]
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        embeddings = loaded.clip.image_embeddings(images).to(loaded.clip.dtype)
        scores = loaded.mlp(embeddings).squeeze(-1)
        return scores.double().cpu().numpy(), {}


def build_aesthetic(config: AestheticConfig, ctx: Any) -> AestheticReward:
    """Factory of ``aesthetic``: checks local paths now, loads the weights on the first call."""
    return AestheticReward(config, ctx)
