"""2x2 packing is a permutation of the latents into FLUX's / Qwen-Image's token layout, and unpacking undoes it."""

from __future__ import annotations

import torch
from omni_rl_pipelines.packed_latents import pack, unpack


def test_pack_puts_each_2x2_patch_into_one_token_channel_major() -> None:
    latents = torch.arange(2 * 3 * 4 * 6, dtype=torch.float32).reshape(2, 3, 4, 6)
    tokens = pack(latents)
    assert tokens.shape == (2, 2 * 3, 3 * 4)
    # token (row 1, column 2) of sample 1: the patch latents[1, :, 2:4, 4:6], channel by channel, row by row
    expected = latents[1, :, 2:4, 4:6].reshape(-1)
    torch.testing.assert_close(tokens[1, 1 * 3 + 2], expected, rtol=0, atol=0)
    assert torch.equal(unpack(tokens, 4, 6), latents)
