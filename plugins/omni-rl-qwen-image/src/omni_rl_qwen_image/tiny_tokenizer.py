"""A Qwen2 tokenizer for tiny Qwen-Image pipelines, written from scratch so no hub is needed.

It is a real byte-level BPE with Qwen2's pre-tokenizer regex and chat special tokens, saved in the files the hub's
Qwen-Image ``tokenizer/`` folder holds, so it loads through transformers' own ``Qwen2Tokenizer.from_pretrained``.

Why whole-word merges: ``QwenImagePipeline`` drops the first 34 tokens of every encoded prompt (its system-prompt
template, ``prompt_template_encode_start_idx``). With the real vocabulary that prefix is exactly 34 tokens; a
tokenizer that spelled it out byte by byte would leave template tokens in the embeddings. The vocabulary therefore
holds every word of the template as one token (and a few common prompt words), built as chains of merges, so the
template prefix tokenizes to the same 34 pieces as Qwen2.5-VL's tokenizer does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
#: Qwen2.5-VL's vision markers: the text encoder's config needs their ids even though prompts never use them
VISION_TOKENS = ("<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>")
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END, *VISION_TOKENS)

#: Qwen2's pre-tokenizer split (transformers' Qwen2Tokenizer uses the same expression)
PRETOKENIZE_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: The words of QwenImagePipeline's system template, plus common prompt words ("Ġ" = a leading space, as in
#: byte-level BPE); each becomes a single token.
_WORDS = (
    "system", "user", "assistant", "Describe", "Ġthe", "Ġimage", "Ġby", "Ġdetailing", "Ġcolor", "Ġshape", "Ġsize",
    "Ġtexture", "Ġquantity", "Ġtext", "Ġspatial", "Ġrelationships", "Ġof", "Ġobjects", "Ġand", "Ġbackground",
    "Ġa", "Ġphoto", "Ġcat", "Ġdog", "Ġred", "Ġblue", "Ġgreen", "Ġcircle", "Ġsquare", "Ġtriangle", "Ġsign",
    "Ġthat", "Ġsays", "Ġwith", "Ġon", "Ġin",
)  # fmt: skip
#: the whole-word tokens of the text-to-image template (and common prompt words): the default of the functions below
TEXT_TO_IMAGE_WORDS: tuple[str, ...] = _WORDS


def _byte_symbols() -> list[str]:
    """The 256 printable stand-ins byte-level BPE uses for raw bytes."""
    from tokenizers.pre_tokenizers import ByteLevel

    return sorted(ByteLevel.alphabet())


def vocab_and_merges(words: Sequence[str] = _WORDS) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Token -> id and the merges that build each of ``words`` (default :data:`_WORDS`) left to right; the
    Qwen-Image-Edit tiny tokenizer passes its longer template's words (``omni_rl_qwen_image.edit_tiny``)."""
    tokens = _byte_symbols()
    merges: list[tuple[str, str]] = []
    seen = set(tokens)
    for word in words:
        prefix = word[0]
        for char in word[1:]:
            merged = prefix + char
            if merged not in seen:
                merges.append((prefix, char))
                tokens.append(merged)
                seen.add(merged)
            prefix = merged
    tokens += list(SPECIAL_TOKENS)
    return {token: i for i, token in enumerate(tokens)}, merges


def special_token_ids(words: Sequence[str] = _WORDS) -> dict[str, int]:
    vocab, _ = vocab_and_merges(words)
    return {token: vocab[token] for token in SPECIAL_TOKENS}


def write_qwen2_tokenizer(directory: Path, words: Sequence[str] = _WORDS) -> None:
    """Write ``tokenizer.json``, ``vocab.json``, ``merges.txt`` and ``tokenizer_config.json`` of a Qwen2Tokenizer
    whose whole-word tokens are ``words``."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    vocab, merges = vocab_and_merges(words)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
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
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    lines = ["#version: 0.2", *(f"{a} {b}" for a, b in merges)]
    (directory / "merges.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "model_max_length": 32768,
        "eos_token": IM_END,
        "pad_token": ENDOFTEXT,
        "unk_token": None,
        "bos_token": None,
        "padding_side": "right",
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "additional_special_tokens": [IM_START, IM_END, *VISION_TOKENS],
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
