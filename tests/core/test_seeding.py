"""keyed_generator: a stream is a function of its key alone, and neighbouring keys give different streams."""

from __future__ import annotations

import torch

from omni_rl.seeding import keyed_generator


def test_the_same_key_gives_the_same_stream() -> None:
    first = torch.randn(8, generator=keyed_generator(0, 3, 7, 4_242))
    assert torch.equal(first, torch.randn(8, generator=keyed_generator(0, 3, 7, 4_242)))


def test_neighbouring_keys_give_different_streams() -> None:
    draws = [torch.randn(8, generator=keyed_generator(0, step, group)) for step in (3, 4) for group in (7, 8)]
    for i, a in enumerate(draws):
        for b in draws[i + 1 :]:
            assert not torch.allclose(a, b)
