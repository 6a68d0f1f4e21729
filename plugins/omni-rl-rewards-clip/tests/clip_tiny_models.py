"""Tiny random models of the published rewards' own classes, written to disk the way the hub holds them.

* a CLIP directory: ``CLIPModel.save_pretrained`` + ``CLIPProcessor.save_pretrained`` (a CLIPTokenizer whose
  vocabulary is every printable ASCII character, with and without the ``</w>`` end-of-word mark, and no merges,
  so every word is spelled out; a PIL CLIP image processor at 32 px);
* an HPSv2-style checkpoint: ``{"state_dict": ...}`` with open_clip's tensor names and shapes, random values;
* an aesthetic-predictor weights file: the ``layers.N`` state dict of the published MLP class.

Everything is built offline from configs, so the tests load these through the same code as the real weights.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import torch
from omni_rl_rewards_clip import hooks
from transformers import CLIPConfig, CLIPModel, CLIPProcessor, CLIPTokenizer
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.specs import RewardSpec

BOS, EOS = "<|startoftext|>", "<|endoftext|>"
IMAGE_SIZE = 32
PATCH = 8
WIDTH = 32
LAYERS = 2
HEADS = 2
CONTEXT = 77


def tokenizer_vocab() -> dict[str, int]:
    """Characters, then the same with ``</w>``, then BOS and EOS: EOS has the largest id, as in CLIP's vocabulary
    (open_clip pools the text at ``argmax(token ids)``, which relies on that)."""
    characters = [c for c in string.printable if not c.isspace()]
    tokens = [*characters, *(c + "</w>" for c in characters), BOS, EOS]
    return {token: index for index, token in enumerate(tokens)}


def tiny_processor(directory: Path) -> CLIPProcessor:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.json").write_text(json.dumps(tokenizer_vocab()), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    tokenizer = CLIPTokenizer(
        str(directory / "vocab.json"),
        str(directory / "merges.txt"),
        unk_token=EOS,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=EOS,
        model_max_length=CONTEXT,
    )
    image_processor = CLIPImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE}, crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE}
    )
    return CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer)


def tiny_clip_config(projection_dim: int = 16) -> CLIPConfig:
    vocab = tokenizer_vocab()
    tower: dict[str, Any] = {
        "hidden_size": WIDTH,
        "intermediate_size": 4 * WIDTH,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "hidden_act": "gelu",
    }
    text = {
        **tower,
        "vocab_size": len(vocab),
        "max_position_embeddings": CONTEXT,
        "bos_token_id": vocab[BOS],
        "eos_token_id": vocab[EOS],
        "pad_token_id": vocab[EOS],
    }
    vision = {**tower, "image_size": IMAGE_SIZE, "patch_size": PATCH}
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=projection_dim)


def save_tiny_clip(directory: Path, *, seed: int = 0, projection_dim: int = 16) -> Path:
    """A random CLIPModel and its processor saved in ``directory`` (the layout of a hub CLIP repository)."""
    torch.manual_seed(seed)
    model = CLIPModel(tiny_clip_config(projection_dim)).eval()
    # A logit scale that is not the init value, so a formula that forgets it cannot pass by accident.
    model.logit_scale.data.fill_(3.1)
    model.save_pretrained(directory)
    tiny_processor(directory).save_pretrained(directory)
    return directory


def save_tiny_processor_repo(directory: Path) -> Path:
    """What HPSv2 takes from laion/CLIP-ViT-H-14: the CLIP config, tokenizer and image processor (no weights)."""
    tiny_clip_config().save_pretrained(directory)
    tiny_processor(directory).save_pretrained(directory)
    return directory


def openclip_state_dict(*, seed: int = 0, projection_dim: int = 16) -> dict[str, torch.Tensor]:
    """Random tensors under open_clip's names, with the shapes of the tiny config's towers."""
    generator = torch.Generator().manual_seed(seed)

    def rand(*shape: int, scale: float = 0.2) -> torch.Tensor:
        return torch.randn(*shape, generator=generator) * scale

    grid = (IMAGE_SIZE // PATCH) ** 2
    state = {
        "visual.conv1.weight": rand(WIDTH, 3, PATCH, PATCH),
        "visual.class_embedding": rand(WIDTH),
        "visual.positional_embedding": rand(grid + 1, WIDTH),
        "visual.proj": rand(WIDTH, projection_dim),
        "token_embedding.weight": rand(len(tokenizer_vocab()), WIDTH),
        "positional_embedding": rand(CONTEXT, WIDTH),
        "text_projection": rand(WIDTH, projection_dim),
        "logit_scale": torch.tensor(4.6),
    }
    for name in ("visual.ln_pre", "visual.ln_post", "ln_final"):
        state[f"{name}.weight"], state[f"{name}.bias"] = 1 + rand(WIDTH), rand(WIDTH)
    for prefix in ("visual.transformer", "transformer"):
        for layer in range(LAYERS):
            block = f"{prefix}.resblocks.{layer}."
            state[block + "attn.in_proj_weight"] = rand(3 * WIDTH, WIDTH)
            state[block + "attn.in_proj_bias"] = rand(3 * WIDTH)
            state[block + "attn.out_proj.weight"] = rand(WIDTH, WIDTH)
            state[block + "attn.out_proj.bias"] = rand(WIDTH)
            for norm in ("ln_1", "ln_2"):
                state[f"{block}{norm}.weight"], state[f"{block}{norm}.bias"] = 1 + rand(WIDTH), rand(WIDTH)
            state[block + "mlp.c_fc.weight"], state[block + "mlp.c_fc.bias"] = rand(4 * WIDTH, WIDTH), rand(4 * WIDTH)
            state[block + "mlp.c_proj.weight"], state[block + "mlp.c_proj.bias"] = rand(WIDTH, 4 * WIDTH), rand(WIDTH)
    return state


class PublishedAestheticMLP(torch.nn.Module):
    """The improved aesthetic predictor's class as published (``self.layers``, Linear/Dropout, no activations)."""

    def __init__(self, input_size: int) -> None:
        super().__init__()
        self.layers = torch.nn.Sequential(
            torch.nn.Linear(input_size, 1024),
            torch.nn.Dropout(0.2),
            torch.nn.Linear(1024, 128),
            torch.nn.Dropout(0.2),
            torch.nn.Linear(128, 64),
            torch.nn.Dropout(0.1),
            torch.nn.Linear(64, 16),
            torch.nn.Linear(16, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def save_aesthetic_mlp(path: Path, *, input_size: int = 16, seed: int = 0) -> Path:
    torch.manual_seed(seed)
    torch.save(PublishedAestheticMLP(input_size).state_dict(), path)
    return path


def reward_spec(name: str) -> RewardSpec:
    """The plugin's record called ``name`` (by name, so a reordering of the hook's list cannot swap tests)."""
    (spec,) = [record for record in hooks.omni_rl_reward_models() if record.name == name]
    return spec


def build_reward(name: str, options: dict[str, Any] | None = None, ctx: BuildContext | None = None) -> Any:
    """The reward ``name`` built by its factory from TOML-shaped ``options``, as a run builds it."""
    spec = reward_spec(name)
    return spec.factory(structure_options(spec, options or {}), ctx or BuildContext())


def save_tiny_clip_vision(directory: Path, *, seed: int = 0, projection_dim: int = 16) -> Path:
    """A vision-only CLIP checkpoint (``CLIPVisionModelWithProjection``, model type ``clip_vision_model``) and its
    image processor: the layout of an image encoder shipped alone (Wan2.1 I2V's ``image_encoder``)."""
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    torch.manual_seed(seed)
    config = CLIPVisionConfig(
        hidden_size=WIDTH,
        intermediate_size=4 * WIDTH,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        image_size=IMAGE_SIZE,
        patch_size=PATCH,
        projection_dim=projection_dim,
    )
    CLIPVisionModelWithProjection(config).eval().save_pretrained(directory)
    tiny_processor(directory).image_processor.save_pretrained(directory)
    return directory


def save_tiny_dinov2(directory: Path, *, seed: int = 0) -> Path:
    """A random ``Dinov2Model`` and the image processor DINOv2 checkpoints ship (BitImageProcessor: shortest edge,
    centre crop, ImageNet mean and std), at 32 px, saved as a hub DINOv2 repository holds them."""
    from transformers import Dinov2Config, Dinov2Model
    from transformers.models.bit.image_processing_pil_bit import BitImageProcessorPil

    torch.manual_seed(seed)
    config = Dinov2Config(
        hidden_size=WIDTH,
        intermediate_size=2 * WIDTH,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        image_size=IMAGE_SIZE,
        patch_size=PATCH,
    )
    Dinov2Model(config).eval().save_pretrained(directory)
    BitImageProcessorPil(
        size={"shortest_edge": IMAGE_SIZE + 4},
        crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE},
        image_mean=[0.485, 0.456, 0.406],
        image_std=[0.229, 0.224, 0.225],
    ).save_pretrained(directory)
    return directory
