"""Prompt embeddings of Qwen-Image: the pipeline's own encoder, one prompt at a time, cached, offloadable.

Encoding goes through ``QwenImagePipeline.encode_prompt`` itself (the chat template, the 34 template tokens dropped,
the last hidden layer of Qwen2.5-VL, truncation to ``max_sequence_length``), so the embeddings are the pipeline's
bit for bit. Caching, offloading and one-prompt-at-a-time encoding are :class:`omni_rl_pipelines.prompt_cache
.CachedPromptEncoder`'s. Prompts of a batch are right-padded with zeros to the longest, with a mask (1 = token,
0 = padding) that the transformer uses as its attention mask: this is exactly how the pipeline pads a batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from omni_rl_pipelines.prompt_cache import NEGATIVE, POSITIVE, TextEncoderPrompts

# POSITIVE and NEGATIVE: the Conditioning keys of the positive and the negative prompt (each with a ``_mask`` twin)
__all__ = ["NEGATIVE", "POSITIVE", "PromptEncoder", "pad_stack", "stack_texts", "trimmed"]


class PromptEncoder(TextEncoderPrompts):
    """Encodes prompts with the pipeline's Qwen2.5-VL; keeps up to ``cache_size`` distinct prompts on the CPU."""

    def _encode_one(self, prompt: str) -> torch.Tensor:
        embeds, mask = self.pipeline.encode_prompt(
            prompt=[prompt], device=self.device, max_sequence_length=self.max_sequence_length
        )
        if mask is not None:  # one prompt has no padding; the pipeline drops an all-ones mask
            embeds = embeds[:, : int(mask.sum())]
        return embeds[0].detach().cpu()

    def encode(self, prompts: Sequence[str], *, keep: Sequence[str] = ()) -> tuple[torch.Tensor, torch.Tensor]:
        """(embeds (B, L, D) on the CPU, mask (B, L) long) with L the longest prompt's token count.

        ``keep`` names prompts cached even when the cache is off or full (the negative prompt)."""
        return pad_stack(self.rows(prompts, keep=keep))


def pad_stack(rows: Sequence[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(L_i, D) embeddings right-padded with zeros to the longest: ((B, L, D), mask (B, L) long)."""
    length = max(int(r.shape[0]) for r in rows)
    embeds = torch.zeros((len(rows), length, rows[0].shape[-1]), dtype=rows[0].dtype)
    mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, row in enumerate(rows):
        embeds[i, : row.shape[0]] = row
        mask[i, : row.shape[0]] = 1
    return embeds, mask


def trimmed(embeds: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Drop the padding columns no sample of this batch uses; an all-ones mask becomes None, as the pipeline passes.

    Conditioning is padded to the longest prompt of whatever it was concatenated with (a whole rollout); a
    micro-batch only needs its own longest, and the transformer's output for a sample does not depend on masked
    padding, so trimming changes nothing but the cost."""
    length = int(mask.sum(dim=1).max())
    embeds, mask = embeds[:, :length], mask[:, :length]
    return embeds, (None if bool(mask.all()) else mask)


def stack_texts(texts: list[tuple[torch.Tensor, torch.Tensor | None]]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Row-stack (embeds, mask) pairs of different text lengths (each as :func:`trimmed` returns it, None = no
    padding): right-padded with zero embeddings to the longest, the padding masked out; None when nothing is."""
    length = max(embeds.shape[1] for embeds, _ in texts)
    stacked, masks = [], []
    for embeds, mask in texts:
        rows, own = embeds.shape[0], embeds.shape[1]
        if mask is None:
            mask = torch.ones(rows, own, dtype=torch.long, device=embeds.device)
        stacked.append(torch.nn.functional.pad(embeds, (0, 0, 0, length - own)))
        masks.append(torch.nn.functional.pad(mask, (0, length - own)))
    mask = torch.cat(masks)
    return torch.cat(stacked), (None if bool(mask.all()) else mask)
