"""The benchmark's FLOPs count against a hand count."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from flops import forward_flops, peak_flops, sd3_forward_flops


def test_forward_flops_by_hand() -> None:
    # 10 params, 2 layers, width 4, 3 image + 2 text tokens, one dual layer:
    # 2*10*5 = 100; 4*2*25*4 = 800; 4*1*9*4 = 144
    assert forward_flops(10, 2, 4, 3, 2, dual_layers=1) == 100 + 800 + 144


def test_sd3_medium_at_512px() -> None:
    config = {"patch_size": 2, "num_layers": 24, "num_attention_heads": 24, "attention_head_dim": 64}
    config["dual_attention_layers"] = tuple(range(13))
    # 64x64 latents, patch 2 -> 1024 image tokens; 333 text tokens; width 1536
    t = 1024 + 333
    expected = 2 * 2_000_000_000 * t + 4 * 24 * t * t * 1536 + 4 * 13 * 1024 * 1024 * 1536
    assert sd3_forward_flops(config, 2_000_000_000, 512, 333) == expected


def test_peak_lookup() -> None:
    assert peak_flops("NVIDIA H200") == 989.4e12 and peak_flops("Tesla T4") is None
