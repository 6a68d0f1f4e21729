"""CLIP and T5 tokenizers for tiny pipelines (SD3, FLUX, Wan's UMT5), written from scratch so no hub is needed.

The files follow the real layouts, so the tokenizers load through transformers' own loading code:

* CLIP: a byte-level BPE ``vocab.json`` + ``merges.txt`` (the 256 byte symbols, the same with the ``</w>``
  end-of-word suffix, ``<|startoftext|>`` and ``<|endoftext|>``; no merges, so every word is spelled out). The
  CLIP text model pools at the first ``<|endoftext|>``, so its id is what the tiny text config uses as eos.
* T5: a SentencePiece-style Unigram ``tokenizer.json`` built with the ``tokenizers`` library (``<pad>`` = 0,
  ``</s>`` = 1, ``<unk>`` = 2 as in T5, ``▁``-prefixed pieces, ``</s>`` appended by the post-processor).
"""

from __future__ import annotations

import json
import string
from pathlib import Path

CLIP_BOS = "<|startoftext|>"
CLIP_EOS = "<|endoftext|>"
#: SD3's second CLIP tokenizer (OpenCLIP bigG) pads with "!" rather than <|endoftext|>; mirror that.
CLIP_PADS: tuple[str, str] = (CLIP_EOS, "!")
CLIP_MAX_LENGTH = 77

#: A few whole-word pieces so common prompt words are single T5 tokens, like in a real vocabulary.
_T5_WORDS = (
    "a", "an", "the", "of", "on", "in", "and", "with", "photo", "cat", "dog", "red", "blue", "green",
    "circle", "square", "triangle", "sign", "that", "says", "image", "picture",
)  # fmt: skip


def _byte_symbols() -> list[str]:
    """The 256 printable stand-ins byte-level BPE uses for raw bytes (GPT-2's bytes-to-unicode table)."""
    from tokenizers.pre_tokenizers import ByteLevel

    return sorted(ByteLevel.alphabet())


def clip_vocab() -> dict[str, int]:
    """Token -> id of the tiny CLIP BPE vocabulary (514 entries)."""
    symbols = _byte_symbols()
    tokens = [*symbols, *(s + "</w>" for s in symbols), CLIP_BOS, CLIP_EOS]
    return {token: i for i, token in enumerate(tokens)}


def write_clip_vocab_files(directory: Path) -> None:
    """``vocab.json`` and an empty ``merges.txt`` (every word is spelled out in byte symbols)."""
    (directory / "vocab.json").write_text(json.dumps(clip_vocab(), ensure_ascii=False), encoding="utf-8")
    (directory / "merges.txt").write_text("#version: 0.2\n", encoding="utf-8")


def write_clip_tokenizer(directory: Path, *, pad_token: str) -> None:
    """Write ``vocab.json``, ``merges.txt`` and ``tokenizer_config.json`` of a CLIPTokenizer."""
    directory.mkdir(parents=True, exist_ok=True)
    write_clip_vocab_files(directory)
    config = {
        "tokenizer_class": "CLIPTokenizer",
        "model_max_length": CLIP_MAX_LENGTH,
        "bos_token": CLIP_BOS,
        "eos_token": CLIP_EOS,
        "unk_token": CLIP_EOS,
        "pad_token": pad_token,
        "do_lower_case": True,
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")


def t5_pieces() -> list[tuple[str, float]]:
    """(piece, log-prob score) of the tiny Unigram vocabulary; ids follow the list order."""
    pieces: list[tuple[str, float]] = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -3.0)]
    pieces += [(f"▁{word}", -2.0 - 0.01 * i) for i, word in enumerate(_T5_WORDS)]
    chars = string.ascii_lowercase + string.ascii_uppercase + string.digits + string.punctuation
    pieces += [(f"▁{c}", -6.0) for c in chars]
    pieces += [(c, -5.0) for c in chars]
    return pieces


def write_t5_tokenizer(directory: Path) -> None:
    """Write ``tokenizer.json`` + ``tokenizer_config.json`` of a T5TokenizerFast (Unigram, no extra ids)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    tokenizer = Tokenizer(models.Unigram(t5_pieces(), unk_id=2, byte_fallback=False))
    tokenizer.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(" {2,}", " ")])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")]
    )
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    tokenizer.post_processor = processors.TemplateProcessing(
        single=["$A", "</s>"], pair=["$A", "</s>", "$B", "</s>"], special_tokens=[("</s>", 1)]
    )
    directory.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(directory / "tokenizer.json"))
    config = {
        "tokenizer_class": "T5Tokenizer",
        "model_max_length": 512,
        "extra_ids": 0,
        "additional_special_tokens": [],
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "pad_token": "<pad>",
    }
    (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
