"""Prompt embeddings of Qwen-Image 2.1: the pipeline's own encoder, one prompt at a time, cached, offloadable; and
the text-only stand-in for its ``Qwen3VLProcessor``.

Encoding goes through ``QwenImage21Pipeline.encode_prompt`` itself (its raw template string, left padding, the
last decoder layer's output before the final norm, the system turn's tokens dropped), so each prompt's embeddings
are the pipeline's bit for bit. Prompts are encoded one at a time: the pipeline's embeddings of a prompt do not
depend on the other prompts of its batch (their padding is dropped), and caching and offloading are
:class:`omni_rl_pipelines.prompt_cache.CachedPromptEncoder`'s.

Why a stand-in processor: the pipeline's ``processor`` is a transformers ``Qwen3VLProcessor``, which cannot even be
constructed without torchvision (transformers resolves its video processor class, which needs it), so
``QwenImage21Pipeline.from_pretrained`` fails on the ``processor`` folder. Text-to-image prompts use three things of
it: calling it on template strings (the tokenizer with left padding), ``apply_chat_template`` of the system turn
(to count the tokens to drop) and its ``tokenizer``. :class:`TextProcessor` gives those from the folder's
tokenizer alone; the model hands it to ``from_pretrained`` in place of the processor.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from omni_rl_pipelines.prompt_cache import NEGATIVE, POSITIVE, TextEncoderPrompts

from omni_rl.errors import RuntimeFailure
from omni_rl_qwen_image.prompts import pad_stack

__all__ = ["NEGATIVE", "POSITIVE", "QwenImage21Prompts", "TextProcessor"]


def _processor_base() -> type:
    from transformers import ProcessorMixin

    return ProcessorMixin


class TextProcessor(_processor_base()):  # type: ignore[misc]
    """What ``QwenImage21Pipeline`` calls of its ``Qwen3VLProcessor`` for text-only prompts, from the tokenizer.

    A ``ProcessorMixin`` only so that ``from_pretrained`` accepts it as the ``processor`` component; none of the
    mixin's machinery runs (its ``__init__`` is not called)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.chat_template = None

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> TextProcessor:
        from transformers import AutoTokenizer

        return cls(AutoTokenizer.from_pretrained(str(directory)))

    def save_pretrained(self, directory: str | Path, **_: Any) -> None:
        self.tokenizer.save_pretrained(str(directory))

    def apply_chat_template(self, conversation: list, **kwargs: Any) -> Any:
        """The processor's batched form: one conversation in, a list of one token list out (with ``tokenize``)."""
        rendered = self.tokenizer.apply_chat_template(conversation, **kwargs)
        single = bool(conversation) and isinstance(conversation[0], dict)
        return [rendered] if single and kwargs.get("tokenize") else rendered

    def __call__(self, text: Sequence[str], images: Any = None, **kwargs: Any) -> Any:
        if images is not None:
            raise RuntimeFailure(
                "the text-only Qwen-Image 2.1 processor got condition images",
                hint="condition images need transformers' Qwen3VLProcessor (torchvision); qwen_image21 is "
                "text-to-image",
            )
        inputs = self.tokenizer(list(text), **kwargs)
        # the real processor returns the token types (0 = text) alongside the ids
        inputs["mm_token_type_ids"] = torch.zeros_like(inputs["input_ids"])
        return inputs


class QwenImage21Prompts(TextEncoderPrompts):
    """Encodes prompts with the pipeline's Qwen3-VL; keeps up to ``cache_size`` distinct prompts on the CPU."""

    @classmethod
    def for_config(cls, pipeline: Any, options: Any, *, device: torch.device) -> QwenImage21Prompts:
        """The pipeline truncates nothing, so there is no ``max_sequence_length``."""
        return cls(
            pipeline,
            device=device,
            max_sequence_length=0,
            cache_size=options.prompt_cache_size,
            offload=options.offload_text_encoders,
        )

    def _encode_one(self, prompt: str) -> torch.Tensor:
        embeds, mask, _ = self.pipeline.encode_prompt(prompt=[prompt], device=self.device)
        if mask is not None:
            embeds = embeds[:, : int(mask.sum())]
        return embeds[0].detach().cpu()

    def encode(self, prompts: Sequence[str], *, keep: Sequence[str] = ()) -> tuple[torch.Tensor, torch.Tensor]:
        """(embeds (B, L, D) on the CPU, mask (B, L) long) with L the longest prompt's token count."""
        return pad_stack(self.rows(prompts, keep=keep))
