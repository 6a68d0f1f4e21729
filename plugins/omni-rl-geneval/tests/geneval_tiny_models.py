"""Tiny random models of the scorer's real classes, written to disk the way the hub holds them and loaded by
path through the plugin's own loading code: a COCO-sized (80 labels) ``Mask2FormerForUniversalSegmentation``
on a tiny Swin backbone with its image processor, and a tiny ``CLIPModel`` with a CLIPProcessor whose tokenizer
spells every word out character by character (built offline, no vocabulary download)."""

from __future__ import annotations

import json
import string
from pathlib import Path

import torch
from transformers import (
    CLIPConfig,
    CLIPModel,
    CLIPProcessor,
    CLIPTokenizer,
    Mask2FormerConfig,
    Mask2FormerForUniversalSegmentation,
    SwinConfig,
)
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
from transformers.models.mask2former.image_processing_pil_mask2former import Mask2FormerImageProcessorPil

BOS, EOS = "<|startoftext|>", "<|endoftext|>"


def save_tiny_detector(directory: Path, *, seed: int = 0) -> Path:
    """An 80-class Mask2Former (8 queries, Swin with 16-wide stages) and a 64 px image processor."""
    swin = SwinConfig(
        image_size=64,
        patch_size=4,
        embed_dim=16,
        depths=[1, 1, 1, 1],
        num_heads=[1, 1, 2, 2],
        window_size=4,
        out_features=["stage1", "stage2", "stage3", "stage4"],
    )
    config = Mask2FormerConfig(
        backbone_config=swin,
        feature_size=32,
        mask_feature_size=32,
        hidden_dim=32,
        encoder_feedforward_dim=32,
        dim_feedforward=32,
        encoder_layers=1,
        decoder_layers=2,
        num_attention_heads=2,
        num_queries=8,
        num_labels=80,
        id2label={i: f"class_{i}" for i in range(80)},
    )
    torch.manual_seed(seed)
    Mask2FormerForUniversalSegmentation(config).eval().save_pretrained(directory)
    processor = Mask2FormerImageProcessorPil(size={"shortest_edge": 64, "longest_edge": 64}, size_divisor=32)
    processor.save_pretrained(directory)
    return directory


def save_tiny_clip(directory: Path, *, seed: int = 0) -> Path:
    """A random 2-layer, 32-wide CLIPModel at 32 px and its processor."""
    directory.mkdir(parents=True, exist_ok=True)
    characters = [c for c in string.printable if not c.isspace()]
    vocab = {t: i for i, t in enumerate([*characters, *(c + "</w>" for c in characters), BOS, EOS])}
    (directory / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    tokenizer = CLIPTokenizer(
        str(directory / "vocab.json"),
        str(directory / "merges.txt"),
        unk_token=EOS,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=EOS,
        model_max_length=77,
    )
    image_processor = CLIPImageProcessorPil(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
    tower = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2}
    text = {**tower, "vocab_size": len(vocab), "max_position_embeddings": 77}
    text |= {"bos_token_id": vocab[BOS], "eos_token_id": vocab[EOS], "pad_token_id": vocab[EOS]}
    config = CLIPConfig(text_config=text, vision_config={**tower, "image_size": 32, "patch_size": 8}, projection_dim=16)
    torch.manual_seed(seed)
    CLIPModel(config).eval().save_pretrained(directory)
    CLIPProcessor(image_processor=image_processor, tokenizer=tokenizer).save_pretrained(directory)
    return directory
