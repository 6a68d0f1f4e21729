"""A Qwen3 tokenizer for tiny Z-Image pipelines, written from scratch so no hub is needed.

A real byte-level BPE (Qwen2's pre-tokenizer regex, no merges: every word is spelled out in byte symbols) with
Qwen3's chat special tokens and a chat template that renders what Qwen3's does for one user message:
``<|im_start|>user\\n{prompt}<|im_end|>\\n<|im_start|>assistant\\n``, followed by an empty think block only when
``enable_thinking=False``. ZImagePipeline passes ``enable_thinking=True``, so its prompts carry no think block; a
template that ignored the flag would encode different tokens than the real one.
"""

from __future__ import annotations

import json
from pathlib import Path

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
THINK = "<think>"
END_THINK = "</think>"
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END, THINK, END_THINK)

#: Qwen2's (and Qwen3's) pre-tokenizer split
PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: Qwen3's chat template reduced to what a list of plain messages renders, with the same ``enable_thinking`` rule
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}"
    "{%- endif %}"
    "{%- endif %}"
)


def vocab() -> dict[str, int]:
    """Token -> id: the 256 byte symbols, then the special tokens."""
    from tokenizers.pre_tokenizers import ByteLevel

    tokens = [*sorted(ByteLevel.alphabet()), *SPECIAL_TOKENS]
    return {token: i for i, token in enumerate(tokens)}


def write_qwen3_tokenizer(directory: Path) -> None:
    """Write ``tokenizer.json``, ``vocab.json``, ``merges.txt`` and ``tokenizer_config.json`` (with the chat
    template) of a Qwen2Tokenizer, the class Qwen3 checkpoints name."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    table = vocab()
    tokenizer = Tokenizer(models.BPE(vocab=table, merges=[], fuse_unk=False, byte_fallback=False))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    (directory / "vocab.json").write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")
    config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "model_max_length": 131072,
        "eos_token": IM_END,
        "pad_token": ENDOFTEXT,
        "unk_token": None,
        "bos_token": None,
        "padding_side": "right",
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "additional_special_tokens": [IM_START, IM_END, THINK, END_THINK],
        "chat_template": CHAT_TEMPLATE,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
