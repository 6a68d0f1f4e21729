"""Prompt embeddings of Z-Image: the pipeline's own encoder, one prompt at a time, cached, offloadable.

Encoding goes through ``ZImagePipeline.encode_prompt`` itself (Qwen3's chat template with ``enable_thinking=True``
and the generation prompt, padding to ``max_sequence_length``, the second-to-last hidden layer, the padding dropped
by the attention mask), so each prompt's embeddings are the pipeline's bit for bit. The pipeline hands the
transformer a list of per-prompt tensors of their own lengths; omni-rl's Conditioning holds them right-padded with
a mask (1 = token), and :func:`unpadded` turns rows back into that list.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from omni_rl_pipelines.prompt_cache import NEGATIVE, POSITIVE, TextEncoderPrompts

__all__ = ["NEGATIVE", "POSITIVE", "ZImagePrompts", "pad_stack", "unpadded"]


class ZImagePrompts(TextEncoderPrompts):
    """Encodes prompts with the pipeline's Qwen3; keeps up to ``cache_size`` distinct prompts on the CPU."""

    def _encode_one(self, prompt: str) -> torch.Tensor:
        embeds, _ = self.pipeline.encode_prompt(
            prompt=[prompt],
            device=self.device,
            do_classifier_free_guidance=False,
            max_sequence_length=self.max_sequence_length,
        )
        return embeds[0].detach().cpu()

    def encode(self, prompts: Sequence[str], *, keep: Sequence[str] = ()) -> tuple[torch.Tensor, torch.Tensor]:
        """(embeds (B, L, D) on the CPU, mask (B, L) long) with L the longest prompt's token count."""
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


def unpadded(embeds: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
    """The per-prompt list the transformer takes: row i cut to its own ``mask[i].sum()`` tokens. The transformer pads
    each caption to a multiple of 32 with its learned pad token and masks only the padding between samples, so a
    sample's output depends only on its own caption length, never on the other samples of the batch."""
    lengths = mask.sum(dim=1).tolist()
    return [embeds[i, : int(n)] for i, n in enumerate(lengths)]
