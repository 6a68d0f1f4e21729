"""Prompt embeddings of Qwen-Image: the pipeline's own encoder, one prompt at a time, cached, offloadable.

Encoding goes through ``QwenImagePipeline.encode_prompt`` itself (the chat template, the 34 template tokens dropped,
the last hidden layer of Qwen2.5-VL, truncation to ``max_sequence_length``), so the embeddings are the pipeline's
bit for bit. Each prompt is encoded alone: the text encoder's output depends (at float rounding) on what else
shares its batch, and a prompt's images must not depend on which other prompts share its worker. Prompts of a
batch are then right-padded with zeros to the longest, with a mask (1 = token, 0 = padding) that the transformer
uses as its attention mask: this is exactly how the pipeline pads a batch of prompts.

Why a cache: RL revisits the same prompts every epoch and the negative prompt every step, and the real text
encoder is a 7B model; a hit skips it entirely (and, with ``offload_text_encoder``, skips moving it to the GPU).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import torch

#: the Conditioning keys of the positive and the negative prompt (each with a ``_mask`` twin)
POSITIVE = "prompt_embeds"
NEGATIVE = "negative_prompt_embeds"


class PromptEncoder:
    """Encodes prompts with a pipeline's text encoder; keeps up to ``cache_size`` distinct prompts on the CPU."""

    def __init__(
        self, pipeline: Any, *, device: torch.device, max_sequence_length: int, cache_size: int, offload: bool
    ) -> None:
        self.pipeline = pipeline
        self.device = device
        self.max_sequence_length = max_sequence_length
        self.cache_size = cache_size
        #: keep the text encoder on the CPU between uses (moved to ``device`` for each batch of cache misses)
        self.offload = offload
        self._cache: OrderedDict[str, torch.Tensor] = OrderedDict()
        #: prompts kept whatever the cache size (the negative prompt, used every step)
        self._pinned: dict[str, torch.Tensor] = {}
        #: how many prompts went through the text encoder (tests and logs read it)
        self.encoded_count = 0

    @torch.no_grad()
    def encode(self, prompts: Sequence[str], *, keep: Sequence[str] = ()) -> tuple[torch.Tensor, torch.Tensor]:
        """(embeds (B, L, D) on the CPU, mask (B, L) long) with L the longest prompt's token count.

        ``keep`` names prompts cached even when the cache is off or full (the negative prompt)."""
        missing = [p for p in dict.fromkeys(prompts) if p not in self._cache and p not in self._pinned]
        fresh = self._run_text_encoder(missing) if missing else {}
        rows = [fresh[p] if p in fresh else self._hit(p) for p in prompts]
        for prompt, embeds in fresh.items():
            self._store(prompt, embeds, pinned=prompt in keep)
        return pad_stack(rows)

    def _hit(self, prompt: str) -> torch.Tensor:
        if prompt in self._pinned:
            return self._pinned[prompt]
        self._cache.move_to_end(prompt)
        return self._cache[prompt]

    def _store(self, prompt: str, embeds: torch.Tensor, *, pinned: bool) -> None:
        if pinned:
            self._pinned[prompt] = embeds
            return
        if self.cache_size == 0:
            return
        self._cache[prompt] = embeds
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _run_text_encoder(self, prompts: list[str]) -> dict[str, torch.Tensor]:
        encoder = self.pipeline.text_encoder
        if self.offload:
            encoder.to(self.device)
        try:
            out = {}
            for prompt in prompts:
                embeds, mask = self.pipeline.encode_prompt(
                    prompt=[prompt], device=self.device, max_sequence_length=self.max_sequence_length
                )
                if mask is not None:  # one prompt has no padding; the pipeline drops an all-ones mask
                    embeds = embeds[:, : int(mask.sum())]
                out[prompt] = embeds[0].detach().cpu()
                self.encoded_count += 1
            return out
        finally:
            if self.offload:
                encoder.to("cpu")


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
