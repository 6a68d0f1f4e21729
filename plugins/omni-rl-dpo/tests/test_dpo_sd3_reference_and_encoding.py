"""What the dpo plugin needs from the ``sd3`` model: ``encode_images`` (offline data) and the reference view under
full fine-tuning (``keep_reference_copy``, called by the loss's ``setup``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omni_rl_dpo.config import DPOLossConfig
from omni_rl_dpo.loss import DPOLoss

from omni_rl.context import BuildContext
from omni_rl.errors import RuntimeFailure


def _images(n: int = 2, size: int = 32) -> torch.Tensor:
    return torch.randint(0, 256, (n, size, size, 3), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)


def test_encode_images_is_the_scaled_posterior_mean(sd3_lora_model) -> None:
    model = sd3_lora_model
    images = _images()
    latents = model.encode_images(images)
    # by hand: [0, 255] -> [-1, 1], VAE posterior mean, then the pipeline's latent shift and scale
    pixels = images.permute(0, 3, 1, 2).float() / 255.0 * 2.0 - 1.0
    with torch.no_grad():
        mean = model.vae.encode(pixels).latent_dist.mean
    expected = (mean - model.vae.config.shift_factor) * model.vae.config.scaling_factor
    assert latents.dtype == torch.float32
    assert tuple(latents.shape) == (2, *model.latent_shape(32, 32))
    torch.testing.assert_close(latents, expected)
    torch.testing.assert_close(model.encode_images(images), latents, rtol=0, atol=0)  # deterministic
    assert tuple(model.decode(latents).shape) == tuple(images.shape)


def test_encode_images_refuses_float_images(sd3_lora_model) -> None:
    with pytest.raises(RuntimeFailure, match="uint8"):
        sd3_lora_model.encode_images(torch.zeros(1, 32, 32, 3))


def _velocity(model, x: torch.Tensor) -> torch.Tensor:
    conditioning = model.encode_prompts(["a red square"], guidance_scale=1.0)
    with torch.no_grad():
        return model.predict_velocity(x, torch.tensor([0.6]), conditioning, 1.0)


def test_full_fine_tuning_reference_is_a_frozen_copy_kept_by_setup(tiny_sd3_path: Path) -> None:
    from omni_rl_sd3.config import SD3Config
    from omni_rl_sd3.model import build_sd3_model

    model = build_sd3_model(SD3Config(path=str(tiny_sd3_path), lora_rank=0), BuildContext(device="cpu"))
    with pytest.raises(RuntimeFailure, match="needs LoRA"), model.disable_adapters():
        pass
    DPOLoss(DPOLossConfig()).setup(model)
    x = torch.randn((1, *model.latent_shape(32, 32)), generator=torch.Generator().manual_seed(1))
    before = _velocity(model, x)
    with torch.no_grad():
        for param in model.trainable_parameters():
            param.add_(0.05)  # "training" moves the policy
    trained = model.transformer
    moved = _velocity(model, x)
    with model.disable_adapters():
        reference = _velocity(model, x)
    assert model.transformer is trained
    assert not torch.allclose(moved, before)
    # the same weights in another tensor allocation: CPU kernels may take another vectorised path (alignment), so
    # equal to float rounding, where the moved policy is ~1e-2 away
    torch.testing.assert_close(reference, before, rtol=0, atol=1e-6)
    assert not any(p.requires_grad for p in model.reference_transformer.parameters())


def test_keep_reference_copy_is_a_no_op_with_lora(sd3_lora_model) -> None:
    sd3_lora_model.keep_reference_copy()
    assert sd3_lora_model.reference_transformer is None
