"""A Qwen3 tokenizer for tiny pipelines whose text encoder is Qwen3 or Qwen3-VL (FLUX.2-klein, Z-Image,
Qwen-Image 2.1), written from scratch so no hub is needed.

A real byte-level BPE (Qwen2's pre-tokenizer regex, no merges: every word is spelled out in byte symbols) with
Qwen3's chat special tokens, optionally Qwen3-VL's vision tokens, and a chat template that renders what Qwen3's
does for a list of messages: ``<|im_start|>{role}\\n{content}<|im_end|>\\n`` per message (content a string, or a
list of ``{"type": "text", "text": ...}`` parts as Qwen3-VL's processor template takes it), then the generation
prompt ``<|im_start|>assistant\\n`` and, only with ``enable_thinking=False``, the empty
``<think>\\n\\n</think>\\n\\n`` block. A template that ignored the flag would encode different tokens than the real
one (Flux2KleinPipeline passes False, ZImagePipeline True). It loads through transformers' own
``Qwen2TokenizerFast.from_pretrained``. None of these pipelines drops a fixed-length template prefix by count
(Qwen-Image 2.1 counts its system turn with the tokenizer itself), so no whole-word tokens are needed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK = "<think>"
END_THINK = "</think>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END, THINK, END_THINK)
#: Qwen3-VL's vision markers (its text encoder's config names the ids of the first, the image and video pads)
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")

#: Qwen2's (and Qwen3's) pre-tokenizer split
PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: Qwen3's chat template reduced to what a list of plain messages renders, with the same ``enable_thinking`` rule
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{- message['content'] }}"
    "{%- else %}{%- for part in message['content'] %}{{- part['text'] }}{%- endfor %}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def qwen3_specials(*, vision: bool = False) -> tuple[str, ...]:
    """The special tokens, in id order after the byte symbols; Qwen3-VL's vision tokens last when ``vision``."""
    return (*SPECIAL_TOKENS, *(VISION_TOKENS if vision else ()))


def qwen3_vocab(*, vision: bool = False) -> dict[str, int]:
    """Token -> id: the 256 byte symbols, then the special tokens."""
    from tokenizers.pre_tokenizers import ByteLevel

    tokens = [*sorted(ByteLevel.alphabet()), *qwen3_specials(vision=vision)]
    return {token: i for i, token in enumerate(tokens)}


def write_qwen3_tokenizer(
    directory: Path, *, vision: bool = False, model_max_length: int = 40960, extra_files: Sequence[str] = ()
) -> None:
    """Write ``tokenizer.json``, ``vocab.json``, ``merges.txt`` and ``tokenizer_config.json`` (with the chat
    template) of a Qwen2Tokenizer, the class Qwen3 checkpoints name; ``extra_files`` may name
    ``"chat_template.jinja"`` (the template as its own file too, as newer checkpoints ship it)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    table = qwen3_vocab(vision=vision)
    specials = qwen3_specials(vision=vision)
    tokenizer = Tokenizer(models.BPE(vocab=table, merges=[], fuse_unk=False, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "vocab.json").write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "model_max_length": model_max_length,
        "eos_token": IM_END,
        "pad_token": ENDOFTEXT,
        "unk_token": None,
        "bos_token": None,
        "padding_side": "right",
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "additional_special_tokens": list(specials[1:]),
        "chat_template": CHAT_TEMPLATE,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    if "chat_template.jinja" in extra_files:
        (directory / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
