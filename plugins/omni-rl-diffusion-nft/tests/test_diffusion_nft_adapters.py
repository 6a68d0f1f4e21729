"""The old policy on a real (tiny, random) SD3 model: the adapter the loss adds, its refresh by copy and by EMA,
and the policy views the update and the rollout evaluate (old, current, and reference = the base model)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from pathlib import Path
from typing import Any

import pytest
import torch
from omni_rl_diffusion_nft.config import DiffusionNFTLossConfig
from omni_rl_diffusion_nft.loss import DiffusionNFTLoss

from omni_rl.context import BuildContext
from omni_rl.engine.forward_update import view_context

PROMPT = "a red square above a blue circle"


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    return Path(build_tiny_sd3_pipeline(tmp_path_factory.mktemp("nft-sd3") / "tiny", seed=0, sample_size=8))


def _model(path: Path) -> Any:
    from omni_rl_sd3.config import SD3Config
    from omni_rl_sd3.model import SD3Model

    return SD3Model(SD3Config(path=str(path), lora_rank=2, lora_alpha=4, max_sequence_length=16), BuildContext())


def _weights(model: Any, name: str) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.adapters.parameters_of(name)]


def _train(model: Any, seed: int) -> None:
    """Move the trained adapter (LoRA B starts at zero) as an optimizer would."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.trainable_parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=generator))


def _velocity(model: Any, view: str) -> torch.Tensor:
    """The velocity of one view on fixed inputs, through the same view switch the update and rollout use."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randn((2, *model.latent_shape(16, 16)), generator=generator)
    conditioning = model.encode_prompts([PROMPT, "three green triangles"], guidance_scale=1.0)
    with torch.no_grad(), view_context(model, view):
        return model.predict_velocity(x, torch.tensor([0.8, 0.3]), conditioning, 1.0)


@pytest.fixture
def model(tiny_path: Path) -> Any:
    model = _model(tiny_path)
    DiffusionNFTLoss(DiffusionNFTLossConfig()).setup(model)
    return model


def test_setup_adds_a_frozen_copy_of_the_trained_adapter(model: Any) -> None:
    assert "old" in model.adapters.names
    for old, trained in zip(_weights(model, "old"), _weights(model, "default"), strict=True):
        assert torch.equal(old, trained)
    assert not any(p.requires_grad for p in model.adapters.parameters_of("old"))
    assert all(p.requires_grad for p in model.trainable_parameters())


def test_copy_refresh_makes_old_equal_to_the_trained_adapter(model: Any) -> None:
    _train(model, seed=0)
    assert not all(torch.equal(a, b) for a, b in zip(_weights(model, "old"), _weights(model, "default"), strict=True))
    DiffusionNFTLoss(DiffusionNFTLossConfig(old_decay="copy")).after_update(model, 40)
    for old, trained in zip(_weights(model, "old"), _weights(model, "default"), strict=True):
        assert torch.equal(old, trained)
    torch.testing.assert_close(_velocity(model, "old"), _velocity(model, "current"), rtol=0, atol=0)


@pytest.mark.parametrize(
    ("schedule", "index", "decay"),
    [("ramp", 250, 0.25), ("ramp", 900, 0.5), ("delayed_ramp", 175, 0.75), ("delayed_ramp", 60, 0.0)],
)
def test_ema_refresh_gives_the_expected_weights(model: Any, schedule: str, index: int, decay: float) -> None:
    """old ← d·old + (1 − d)·θ, weight by weight, with d from the schedule at this update index."""
    _train(model, seed=1)
    DiffusionNFTLoss(DiffusionNFTLossConfig(old_decay="copy")).after_update(model, 1)  # old = θ₁
    _train(model, seed=2)  # θ₂
    old_before, trained = _weights(model, "old"), _weights(model, "default")
    DiffusionNFTLoss(DiffusionNFTLossConfig(old_decay=schedule)).after_update(model, index)
    for after, before, theta in zip(_weights(model, "old"), old_before, trained, strict=True):
        expected = decay * before + (1 - decay) * theta
        torch.testing.assert_close(after, expected, rtol=1e-6, atol=1e-7)  # float32 rounding of the blend
    for now, theta in zip(_weights(model, "default"), trained, strict=True):
        assert torch.equal(now, theta)  # the trained adapter is untouched
    assert all(p.requires_grad for p in model.trainable_parameters())


def test_refresh_per_optimizer_step_only_when_asked(model: Any) -> None:
    _train(model, seed=3)
    before = _weights(model, "old")
    loss = DiffusionNFTLoss(DiffusionNFTLossConfig(old_decay="copy", refresh="update"))
    loss.after_optimizer_step(model, 1)
    assert all(torch.equal(a, b) for a, b in zip(_weights(model, "old"), before, strict=True))
    DiffusionNFTLoss(DiffusionNFTLossConfig(old_decay="copy", refresh="optimizer_step")).after_optimizer_step(model, 1)
    assert all(torch.equal(a, b) for a, b in zip(_weights(model, "old"), _weights(model, "default"), strict=True))


def test_reference_view_is_the_base_model(model: Any, tiny_path: Path) -> None:
    """Adapters off is the pretrained transformer: the same output as the plain diffusers transformer."""
    from diffusers import SD3Transformer2DModel

    _train(model, seed=4)
    base = SD3Transformer2DModel.from_pretrained(tiny_path / "transformer").eval()
    generator = torch.Generator().manual_seed(1)
    x = torch.randn((2, *model.latent_shape(16, 16)), generator=generator)
    conditioning = model.encode_prompts([PROMPT, "three green triangles"], guidance_scale=1.0)
    with torch.no_grad():
        expected = base(
            hidden_states=x,
            timestep=torch.tensor([0.8, 0.3]) * 1000,
            encoder_hidden_states=conditioning.tensors["prompt_embeds"],
            pooled_projections=conditioning.tensors["pooled_prompt_embeds"],
            return_dict=False,
        )[0]
    reference = _velocity(model, "reference")
    torch.testing.assert_close(reference, expected, rtol=0, atol=1e-6)
    # before any refresh the old adapter is the initial LoRA (B = 0): the base model too; the trained one is not
    torch.testing.assert_close(_velocity(model, "old"), expected, rtol=0, atol=1e-6)
    assert (_velocity(model, "current") - expected).abs().max() > 1e-3
