"""Hook implementations: the ``diffusion_nft`` loss and the ``diffusion_nft`` algorithm preset.

Only the option class (attrs, stdlib) and the preset table are imported here; torch and the loss code are
imported inside the factory, so listing plugins stays fast and works without torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from omni_rl import AlgorithmSpec, LossSpec, hookimpl
from omni_rl_diffusion_nft.config import DiffusionNFTLossConfig
from omni_rl_diffusion_nft.presets import diffusion_nft_defaults

if TYPE_CHECKING:
    from omni_rl_diffusion_nft.loss import DiffusionNFTLoss


def _build_diffusion_nft_loss(config: DiffusionNFTLossConfig, ctx: Any) -> DiffusionNFTLoss:
    from omni_rl_diffusion_nft.loss import DiffusionNFTLoss

    return DiffusionNFTLoss(config)


@hookimpl
def omni_rl_losses() -> list[LossSpec]:
    return [
        LossSpec(
            name="diffusion_nft",
            factory=_build_diffusion_nft_loss,
            config=DiffusionNFTLossConfig,
            summary="DiffusionNFT: implicit positive/negative policies around an old LoRA adapter, forward process",
        )
    ]


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="diffusion_nft",
            summary="DiffusionNFT: CFG-free ODE rollouts with the old adapter, grpo advantages, diffusion_nft loss",
            defaults=diffusion_nft_defaults(),
        )
    ]
