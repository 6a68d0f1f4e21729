"""UMT5 prompt embeddings of Wan: the pipeline's own encoder, one prompt at a time, cached, offloadable.

Encoding goes through ``WanPipeline.encode_prompt`` itself (its text cleaning, UMT5's last hidden state, the tokens
past each prompt's length replaced by zeros, padded to ``max_sequence_length``), so the embeddings are the
pipeline's bit for bit. Wan's transformer takes no text mask: it attends to the zero rows as well, so they are
part of the conditioning and are kept (the whole ``max_sequence_length``), unlike Qwen-Image's trimmed padding.
Caching, offloading and one-prompt-at-a-time encoding are :class:`omni_rl_pipelines.prompt_cache.CachedPromptEncoder`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from omni_rl_pipelines.prompt_cache import NEGATIVE, POSITIVE, TextEncoderPrompts

# POSITIVE and NEGATIVE: the Conditioning keys of the positive and the negative prompt
__all__ = ["NEGATIVE", "POSITIVE", "PromptEncoder"]


class PromptEncoder(TextEncoderPrompts):
    """Encodes prompts with the pipeline's UMT5; keeps up to ``cache_size`` distinct prompts on the CPU."""

    def _encode_one(self, prompt: str) -> torch.Tensor:
        embeds, _ = self.pipeline.encode_prompt(
            prompt=[prompt],
            do_classifier_free_guidance=False,
            max_sequence_length=self.max_sequence_length,
            device=self.device,
        )
        return embeds[0].detach().cpu()

    def encode(self, prompts: Sequence[str], *, keep: Sequence[str] = ()) -> torch.Tensor:
        """(B, max_sequence_length, D) on the CPU; ``keep`` names prompts cached even when the cache is off or
        full (the negative prompt)."""
        return torch.stack(self.rows(prompts, keep=keep))
