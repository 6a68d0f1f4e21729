"""The prompt cache: each prompt through the encoders once, least recently used evicted, the negative prompt kept."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from omni_rl_pipelines.prompt_cache import TextEncoderPrompts


class CountingPrompts(TextEncoderPrompts):
    def _encode_one(self, prompt: str) -> torch.Tensor:
        return torch.full((2,), float(len(prompt)))


def _encoder(cache_size: int) -> CountingPrompts:
    pipeline = SimpleNamespace(text_encoder=torch.nn.Linear(1, 1))
    options = SimpleNamespace(max_sequence_length=8, prompt_cache_size=cache_size, offload_text_encoders=True)
    return CountingPrompts.for_options(pipeline, options, device=torch.device("cpu"))


def test_for_options_reads_the_memory_options() -> None:
    encoder = _encoder(3)
    assert (encoder.max_sequence_length, encoder.cache_size, encoder.offload) == (8, 3, True)
    assert encoder._encoders() == [encoder.pipeline.text_encoder]


def test_each_distinct_prompt_is_encoded_once_and_the_oldest_goes_first() -> None:
    encoder = _encoder(2)
    rows = encoder.rows(["a", "bb", "a"])
    assert [float(r[0]) for r in rows] == [1.0, 2.0, 1.0] and encoder.encoded_count == 2
    encoder.rows(["a"])  # a hit: "a" becomes the most recent
    encoder.rows(["ccc"])  # evicts "bb", the least recently used
    assert encoder.encoded_count == 3
    encoder.rows(["a"])
    assert encoder.encoded_count == 3
    encoder.rows(["bb"])
    assert encoder.encoded_count == 4


def test_kept_prompts_survive_a_cache_that_is_off() -> None:
    encoder = _encoder(0)
    encoder.rows(["neg", "neg"], keep=["neg"])
    encoder.rows(["neg", "x"], keep=["neg"])
    encoder.rows(["x"])
    assert encoder.encoded_count == 3  # "neg" once (kept), "x" twice (nothing cached)
