"""Prompt embeddings of FLUX: the pipeline's own encoder, one prompt at a time, cached, offloadable.

Encoding goes through ``FluxPipeline.encode_prompt`` itself (CLIP-L's pooled output; T5-XXL's last hidden state
with every prompt padded to ``max_sequence_length`` tokens and no attention mask), so the embeddings are the
pipeline's bit for bit. FLUX's text is fixed-length, so prompts need no mask and ``Conditioning.concat`` pads
nothing. Caching, offloading and one-prompt-at-a-time encoding are :class:`omni_rl_pipelines.prompt_cache
.CachedPromptEncoder`'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from omni_rl_pipelines.prompt_cache import CachedPromptEncoder

#: the Conditioning keys of the positive prompt (T5 tokens and CLIP pooled) and of the negative prompt
POSITIVE = ("prompt_embeds", "pooled_prompt_embeds")
NEGATIVE = ("negative_prompt_embeds", "negative_pooled_prompt_embeds")

_Entry = tuple[torch.Tensor, torch.Tensor]


class PromptEncoder(CachedPromptEncoder[_Entry]):
    """Encodes prompts with the pipeline's CLIP and T5; keeps up to ``cache_size`` distinct prompts on the CPU."""

    def _encoders(self) -> list[torch.nn.Module]:
        return [self.pipeline.text_encoder, self.pipeline.text_encoder_2]

    def _encode_one(self, prompt: str) -> _Entry:
        embeds, pooled, _ = self.pipeline.encode_prompt(
            prompt=[prompt], prompt_2=None, device=self.device, max_sequence_length=self.max_sequence_length
        )
        return embeds[0].detach().cpu(), pooled[0].detach().cpu()

    def encode(self, prompts: Sequence[str], *, keep: Sequence[str] = ()) -> _Entry:
        """(T5 embeds (B, L, D), CLIP pooled (B, P)) on the CPU; ``keep`` names prompts cached even when the cache
        is off or full (the negative prompt)."""
        rows = self.rows(prompts, keep=keep)
        return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])
