"""Option records of the model-based rewards (``[[reward]] options``).

Kept free of torch/transformers imports so that ``hooks.py`` can hand these classes to the registry (which
validates config files against them) in milliseconds. Every weight source is a hub id or a local path: the
default is the published checkpoint, and tests (or offline machines) point it at a directory or file.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from omni_rl.validators import non_empty, positive_finite, positive_int, with_hint

DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")
PICKSCORE_MODEL = "yuvalkirstain/PickScore_v1"
#: PickScore_v1 ships no processor; it was trained with this one (the CLIP it was fine-tuned from)
VIT_H_14 = "laion/CLIP-ViT-H-14-laion2B-s32B-b79K"
CLIP_VIT_L_14 = "openai/clip-vit-large-patch14"


#: a weight source: empty would make transformers look in the working directory
_SOURCE = with_hint(non_empty, "a hub id (e.g. 'openai/clip-vit-large-patch14') or a local path")


def _device(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value != "auto" and value.split(":")[0] not in ("cpu", "cuda", "mps", "xpu", "npu"):
        raise ValueError(
            f"{attribute.name} must be 'auto' or a torch device such as 'cpu', 'cuda' or 'cuda:1', got {value!r}"
        )


@attrs.frozen(kw_only=True)
class ModelRewardConfig:
    """Options every model-based reward shares: where the weights are and how they run.

    ``device = "auto"`` takes the build context's device when it names an accelerator, else ``cuda`` when one
    is visible, else ``cpu``. Inside a reward actor (``[[reward]] resources = {GPU = 1}``) Ray makes the
    actor's own GPU the only one visible, so "auto" lands there.
    """

    #: weights dtype on the device (float32 reproduces the reference implementations most closely)
    dtype: Literal["float32", "bfloat16", "float16"] = attrs.field(
        default="float32", validator=attrs.validators.in_(DTYPES)
    )
    #: images scored per forward pass (the batch a reward receives is split into chunks of this size)
    batch_size: int = attrs.field(default=16, validator=positive_int)
    #: "auto", or a torch device string such as "cuda:1"
    device: str = attrs.field(default="auto", validator=_device)


@attrs.frozen(kw_only=True)
class PickScoreConfig(ModelRewardConfig):
    """Options of ``pickscore``: ``exp(logit_scale) * cos(image, prompt) / scale``."""

    #: CLIPModel hub id or local directory of the PickScore weights
    model: str = attrs.field(default=PICKSCORE_MODEL, validator=_SOURCE)
    #: CLIPProcessor hub id or local directory (tokenizer + image processor)
    processor: str = attrs.field(default=VIT_H_14, validator=_SOURCE)
    #: the score is divided by this; Flow-GRPO and VeRL-Omni use 26 (scores then sit near 0.8-0.9)
    scale: float = attrs.field(default=26.0, converter=float, validator=positive_finite)


@attrs.frozen(kw_only=True)
class ClipScoreConfig(ModelRewardConfig):
    """Options of ``clip_score``: ``factor * cos(image, prompt)``, optionally clamped at 0.

    CLIP-S (Hessel et al. 2021) is ``factor = 2.5, clamp_at_zero = true, prompt_prefix = "A photo depicts "``.
    """

    #: CLIPModel hub id or local directory; its processor is loaded from the same place
    model: str = attrs.field(default=CLIP_VIT_L_14, validator=_SOURCE)
    #: multiplies the cosine (CLIP-S: 2.5)
    factor: float = attrs.field(default=1.0, converter=float, validator=positive_finite)
    #: max(cos, 0) before the factor, as CLIP-S does
    clamp_at_zero: bool = False
    #: text put before every prompt (CLIP-S: "A photo depicts ")
    prompt_prefix: str = ""


@attrs.frozen(kw_only=True)
class HpsV2Config(ModelRewardConfig):
    """Options of ``hpsv2``: the cosine of HPSv2.1's normalised image and text features."""

    #: hub repo id holding ``filename``, a local directory holding it, or a local path of the checkpoint file
    model: str = attrs.field(default="xswu/HPSv2", validator=_SOURCE)
    #: the checkpoint file in the repo or directory (HPS v2.0: "HPS_v2_compressed.pt")
    filename: str = attrs.field(default="HPS_v2.1_compressed.pt", validator=non_empty)
    #: hub id or local directory of the CLIP ViT-H-14 config, tokenizer and image processor HPSv2 builds on
    processor: str = attrs.field(default=VIT_H_14, validator=_SOURCE)


@attrs.frozen(kw_only=True)
class AestheticConfig(ModelRewardConfig):
    """Options of ``aesthetic``: the LAION improved aesthetic predictor on CLIP ViT-L/14 image embeddings."""

    #: CLIPModel hub id or local directory of the image encoder the predictor was trained on
    model: str = attrs.field(default=CLIP_VIT_L_14, validator=_SOURCE)
    #: hub repo id holding ``predictor_file``, a local directory holding it, or a local path of the MLP weights
    predictor: str = attrs.field(default="trl-lib/ddpo-aesthetic-predictor", validator=_SOURCE)
    #: the MLP weights file in the repo or directory (the upstream name is "sac+logos+ava1-l14-linearMSE.pth")
    predictor_file: str = attrs.field(default="aesthetic-model.pth", validator=non_empty)


#: flow_grpo's image_similarity encoder, and a DINOv2 checkpoint (the DINO similarity of editing evaluations)
IMAGE_SIMILARITY_MODELS: dict[str, str] = {"clip": CLIP_VIT_L_14, "dino": "facebook/dinov2-base"}


@attrs.frozen(kw_only=True)
class ImageSimilarityConfig(ModelRewardConfig):
    """Options of ``image_similarity``: cos(ê(output), ê(source)) of an image encoder's embeddings."""

    #: "clip": a CLIP model's projected image features (flow_grpo's image_similarity); "dino": the CLS token of a
    #: DINO-family ViT (DINOv2, DINOv2 with registers, DINOv3, DINO v1 ViTs)
    backbone: Literal["clip", "dino"] = attrs.field(default="clip", validator=attrs.validators.in_(("clip", "dino")))
    #: hub id or local directory of the encoder and its image processor (default: the backbone's, above)
    model: str = attrs.field(validator=_SOURCE)
    #: which condition images the output is compared with: "first" (the source of a single-image edit) or
    #: "mean" (the mean of the cosines to each of the sample's condition images)
    source_images: Literal["first", "mean"] = attrs.field(
        default="first", validator=attrs.validators.in_(("first", "mean"))
    )

    @model.default
    def _backbone_model(self) -> str:
        return IMAGE_SIMILARITY_MODELS[self.backbone]
