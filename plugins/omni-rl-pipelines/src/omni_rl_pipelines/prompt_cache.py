"""Per-prompt text embeddings, encoded one prompt at a time, cached on the CPU, with offloadable text encoders.

Shared by the FLUX, Qwen-Image and Wan adapters (their text encoders are 4.7B, 7B and 5.7B models). Each prompt is
encoded alone: an encoder's output may depend (at float rounding) on what else shares its batch, and a prompt's
images must not depend on which other prompts share its worker. The cache exists because RL revisits the same prompts
every epoch and the negative prompt every step: a hit skips the encoders entirely (and, with ``offload``, skips
moving them to the device).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import torch

from omni_rl_pipelines.pipeline_model import on_device

if TYPE_CHECKING:
    from typing_extensions import Self

Entry = TypeVar("Entry")

#: the Conditioning keys of a prompt's and of the negative prompt's embeddings (the pipelines' argument names)
POSITIVE = "prompt_embeds"
NEGATIVE = "negative_prompt_embeds"


class CachedPromptEncoder(Generic[Entry]):
    """Encodes prompts with a pipeline's text encoders; keeps up to ``cache_size`` distinct prompts on the CPU.

    A subclass says which modules encode (:meth:`_encoders`), what one prompt's entry is (:meth:`_encode_one`, on
    the CPU) and how entries become a batch."""

    def __init__(
        self, pipeline: Any, *, device: torch.device, max_sequence_length: int, cache_size: int, offload: bool
    ) -> None:
        self.pipeline = pipeline
        self.device = device
        self.max_sequence_length = max_sequence_length
        self.cache_size = cache_size
        #: keep the text encoders on the CPU between uses (moved to ``device`` for each batch of cache misses)
        self.offload = offload
        self._cache: OrderedDict[str, Entry] = OrderedDict()
        #: prompts kept whatever the cache size (the negative prompt, used every step)
        self._pinned: dict[str, Entry] = {}
        #: how many prompts went through the text encoders (tests and logs read it)
        self.encoded_count = 0

    @classmethod
    def for_options(cls, pipeline: Any, options: Any, *, device: torch.device) -> Self:
        """The encoder a model's options ask for: ``max_sequence_length``, ``prompt_cache_size`` and
        ``offload_text_encoders`` (:class:`~omni_rl_pipelines.options.MemoryOptions`)."""
        return cls(
            pipeline,
            device=device,
            max_sequence_length=options.max_sequence_length,
            cache_size=options.prompt_cache_size,
            offload=options.offload_text_encoders,
        )

    def _encoders(self) -> list[torch.nn.Module]:
        raise NotImplementedError

    def _encode_one(self, prompt: str) -> Entry:
        raise NotImplementedError

    @torch.no_grad()
    def rows(self, prompts: Sequence[str], *, keep: Sequence[str] = ()) -> list[Entry]:
        """One entry per prompt; ``keep`` names prompts cached even when the cache is off or full (the negative
        prompt)."""
        missing = [p for p in dict.fromkeys(prompts) if p not in self._cache and p not in self._pinned]
        fresh: dict[str, Entry] = {}
        if missing:
            with on_device(self.device, *self._encoders(), enabled=self.offload):
                for prompt in missing:
                    fresh[prompt] = self._encode_one(prompt)
                    self.encoded_count += 1
        rows = [fresh[p] if p in fresh else self._hit(p) for p in prompts]
        for prompt, entry in fresh.items():
            self._store(prompt, entry, pinned=prompt in keep)
        return rows

    def _hit(self, prompt: str) -> Entry:
        if prompt in self._pinned:
            return self._pinned[prompt]
        self._cache.move_to_end(prompt)
        return self._cache[prompt]

    def _store(self, prompt: str, entry: Entry, *, pinned: bool) -> None:
        if pinned:
            self._pinned[prompt] = entry
            return
        if self.cache_size == 0:
            return
        self._cache[prompt] = entry
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)


class TextEncoderPrompts(CachedPromptEncoder[torch.Tensor]):
    """The encoder of a pipeline with one text encoder, ``pipeline.text_encoder`` (Qwen-Image's Qwen2.5-VL, Wan's
    UMT5), whose entry per prompt is one embedding tensor; the subclass says how one prompt is encoded."""

    def _encoders(self) -> list[torch.nn.Module]:
        return [self.pipeline.text_encoder]
