"""Prompt embeddings of FLUX.2-klein: the pipeline's own Qwen3 encoder, one prompt at a time, cached, offloadable.

Encoding goes through ``Flux2KleinPipeline.encode_prompt`` itself (the chat template with ``enable_thinking =
False``, every prompt padded to ``max_sequence_length`` tokens, the hidden states of layers 9, 18 and 27 stacked
on the feature axis), so the embeddings are the pipeline's bit for bit. The text is fixed-length, so prompts need
no mask and the text ids (0, 0, 0, token index) depend on the length only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from omni_rl_pipelines.prompt_cache import NEGATIVE, POSITIVE, TextEncoderPrompts

__all__ = ["NEGATIVE", "POSITIVE", "PromptEncoder"]


class PromptEncoder(TextEncoderPrompts):
    """Encodes prompts with the pipeline's Qwen3; keeps up to ``cache_size`` distinct prompts on the CPU."""

    def _encode_one(self, prompt: str) -> torch.Tensor:
        embeds, _ = self.pipeline.encode_prompt(
            prompt=[prompt], device=self.device, max_sequence_length=self.max_sequence_length
        )
        return embeds[0].detach().cpu()

    def encode(self, prompts: Sequence[str], *, keep: Sequence[str] = ()) -> torch.Tensor:
        """Embeddings (B, L, 3 D) on the CPU; ``keep`` names prompts cached even when the cache is off or full."""
        return torch.stack(self.rows(prompts, keep=keep))
