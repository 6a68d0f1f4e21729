"""Prompt embeddings of FLUX: the pipeline's own encoder, one prompt at a time, cached, offloadable.

Encoding goes through ``FluxPipeline.encode_prompt`` itself (CLIP-L's pooled output; T5-XXL's last hidden state
with every prompt padded to ``max_sequence_length`` tokens and no attention mask), so the embeddings are the
pipeline's bit for bit. FLUX's text is fixed-length, so prompts need no mask and ``Conditioning.concat`` pads
nothing. Each prompt is still encoded alone: an encoder's output may depend (at float rounding) on what else
shares its batch, and a prompt's images must not depend on which other prompts share its worker.

Why a cache: RL revisits the same prompts every epoch and the negative prompt every step, and the real T5 is a
4.7B model; a hit skips both encoders entirely (and, with ``offload``, skips moving them to the GPU).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

#: the Conditioning keys of the positive prompt (T5 tokens and CLIP pooled) and of the negative prompt
POSITIVE = ("prompt_embeds", "pooled_prompt_embeds")
NEGATIVE = ("negative_prompt_embeds", "negative_pooled_prompt_embeds")

_Entry = tuple[torch.Tensor, torch.Tensor]


class PromptEncoder:
    """Encodes prompts with a pipeline's text encoders; keeps up to ``cache_size`` distinct prompts on the CPU."""

    def __init__(
        self, pipeline: Any, *, device: torch.device, max_sequence_length: int, cache_size: int, offload: bool
    ) -> None:
        self.pipeline = pipeline
        self.device = device
        self.max_sequence_length = max_sequence_length
        self.cache_size = cache_size
        #: keep the text encoders on the CPU between uses (moved to ``device`` for each batch of cache misses)
        self.offload = offload
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        #: prompts kept whatever the cache size (the negative prompt, used every step)
        self._pinned: dict[str, _Entry] = {}
        #: how many prompts went through the text encoders (tests and logs read it)
        self.encoded_count = 0

    @torch.no_grad()
    def encode(self, prompts: Sequence[str], *, keep: Sequence[str] = ()) -> _Entry:
        """(T5 embeds (B, L, D), CLIP pooled (B, P)) on the CPU; ``keep`` names prompts cached even when the cache
        is off or full (the negative prompt)."""
        missing = [p for p in dict.fromkeys(prompts) if p not in self._cache and p not in self._pinned]
        fresh = self._run_text_encoders(missing) if missing else {}
        rows = [fresh[p] if p in fresh else self._hit(p) for p in prompts]
        for prompt, entry in fresh.items():
            self._store(prompt, entry, pinned=prompt in keep)
        return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])

    def _hit(self, prompt: str) -> _Entry:
        if prompt in self._pinned:
            return self._pinned[prompt]
        self._cache.move_to_end(prompt)
        return self._cache[prompt]

    def _store(self, prompt: str, entry: _Entry, *, pinned: bool) -> None:
        if pinned:
            self._pinned[prompt] = entry
            return
        if self.cache_size == 0:
            return
        self._cache[prompt] = entry
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)

    def _run_text_encoders(self, prompts: list[str]) -> dict[str, _Entry]:
        out = {}
        with self._encoders_on_device():
            for prompt in prompts:
                embeds, pooled, _ = self.pipeline.encode_prompt(
                    prompt=[prompt], prompt_2=None, device=self.device, max_sequence_length=self.max_sequence_length
                )
                out[prompt] = (embeds[0].detach().cpu(), pooled[0].detach().cpu())
                self.encoded_count += 1
        return out

    @contextmanager
    def _encoders_on_device(self) -> Iterator[None]:
        encoders = [self.pipeline.text_encoder, self.pipeline.text_encoder_2]
        if self.offload:
            for encoder in encoders:
                encoder.to(self.device)
        try:
            yield
        finally:
            if self.offload:
                for encoder in encoders:
                    encoder.to("cpu")
