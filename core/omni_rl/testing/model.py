"""Conformance suite for model adapters (:class:`omni_rl.protocols.DiffusionModel`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from omni_rl.batch import Conditioning
from omni_rl.protocols import DiffusionModel
from omni_rl.specs import ModelSpec
from omni_rl.testing._base import SpecConformance, torch_module


class ModelConformance(SpecConformance):
    """Subclass with ``spec`` and, almost always, ``options`` that build a tiny random model from a local
    path (tests never download): see :class:`SpecConformance`.

    Optional fixtures: ``image_size`` ((height, width), default (64, 64)) and ``prompts`` (default two).
    Checks: velocity has the latents' shape in float32, with and without CFG, and a sample's velocity does not
    depend on the other prompts of its batch (of other lengths, joined by ``Conditioning.concat``); the sigma
    schedule runs from 1 down to 0, strictly decreasing; decode gives uint8 (B, H, W, 3) (a video model, ``modality =
    "video"``: latents (C, F', h, w) and frames (B, F, H, W, 3) at the default ``num_frames``); LoRA parameters are
    trainable, the adapters can be switched off, and save_lora/load_lora round-trips
    (``pytorch_lora_weights.safetensors``). A model that takes condition images (``condition_images``, as its
    spec says) is encoded through ``encode_conditions`` with random sources of two sizes, and its velocity must
    change with them.

    ``component`` is built per test by default; to build the model once, override it with a
    ``scope="class"`` fixture that builds it itself (the tests set the LoRA weights they need explicitly, so
    sharing one model between them is safe).
    """

    spec_class: ClassVar[type[ModelSpec]] = ModelSpec
    num_steps: ClassVar[int] = 4

    @pytest.fixture
    def image_size(self) -> tuple[int, int]:
        return (64, 64)

    @pytest.fixture
    def prompts(self) -> list[str]:
        return ["a red square above a blue circle", "a green triangle"]

    def _latents(self, model: DiffusionModel, image_size: tuple[int, int], batch: int) -> Any:
        torch = torch_module()
        shape = model.latent_shape(*image_size)
        generator = torch.Generator().manual_seed(0)
        return torch.randn((batch, *shape), generator=generator).to(model.device)

    def _velocity(self, model: DiffusionModel, image_size: tuple[int, int], prompts: list[str], cfg: float) -> Any:
        torch = torch_module()
        conditioning = _encode(model, prompts, cfg)
        latents = self._latents(model, image_size, len(prompts))
        sigmas = torch.full((len(prompts),), 0.7, device=model.device)
        with torch.no_grad():
            return model.predict_velocity(latents, sigmas, conditioning, cfg)

    def _perturb_lora(self, model: DiffusionModel, seed: int) -> None:
        torch = torch_module()
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for parameter in model.trainable_parameters():
                noise = torch.randn(parameter.shape, generator=generator) * 0.1
                parameter.copy_(noise.to(parameter.device, parameter.dtype))

    def test_spec_declares_the_models_modality(self, spec: ModelSpec, component: Any) -> None:
        """``omni-rl check`` refuses frames for a model whose spec says "image" without building it: the spec's
        ``modality`` must be the built model's (its ``modality`` attribute, "image" when absent)."""
        assert spec.modality == getattr(component, "modality", "image")

    def test_spec_declares_the_models_condition_images(self, spec: ModelSpec, component: Any) -> None:
        """``omni-rl check`` counts each prompt row's condition images against the spec's ``condition_images``
        without building the model: it must be the built model's (its ``condition_images`` attribute, (0, 0) when
        absent), and a model that takes any has ``encode_conditions`` (docs/hooks.md, "Condition images")."""
        assert tuple(spec.condition_images) == tuple(getattr(component, "condition_images", (0, 0)))
        if spec.condition_images[1]:
            assert callable(getattr(component, "encode_conditions", None))

    @pytest.mark.parametrize("cfg", [1.0, 4.5])
    def test_velocity_follows_the_condition_images(
        self, component: DiffusionModel, image_size: tuple[int, int], prompts: list[str], cfg: float
    ) -> None:
        """An editing or image-to-video model's velocity changes with its condition images (same prompt, latents
        and sigma): the condition reaches the transformer. Text-only models skip."""
        torch = torch_module()
        if not getattr(component, "condition_images", (0, 0))[1]:
            pytest.skip("the model takes no condition images")
        latents = self._latents(component, image_size, 1)
        sigmas = torch.full((1,), 0.7, device=component.device)
        with torch.no_grad():
            first, second = (
                component.predict_velocity(latents, sigmas, _encode(component, prompts[:1], cfg, seed=s), cfg)
                for s in (0, 1)
            )
        assert first.shape == latents.shape and not torch.allclose(first, second)

    def test_is_a_diffusion_model(self, component: Any) -> None:
        assert isinstance(component, DiffusionModel)

    def test_sigma_schedule_falls_from_one_to_zero(
        self, component: DiffusionModel, image_size: tuple[int, int]
    ) -> None:
        torch = torch_module()
        sigmas = component.sigma_schedule(self.num_steps, *image_size)
        assert sigmas.shape == (self.num_steps + 1,)
        assert sigmas.dtype == torch.float32
        assert abs(float(sigmas[0]) - 1.0) < 1e-6
        assert float(sigmas[-1]) == 0.0
        assert bool((sigmas[1:] < sigmas[:-1]).all()), f"not strictly decreasing: {sigmas.tolist()}"

    def test_latent_shape(self, component: DiffusionModel, image_size: tuple[int, int]) -> None:
        shape = component.latent_shape(*image_size)
        assert len(shape) == (4 if _is_video(component) else 3)
        assert all(isinstance(d, int) and d > 0 for d in shape)

    @pytest.mark.parametrize("cfg", [1.0, 4.5])
    def test_encode_prompts_one_row_per_prompt(self, component: DiffusionModel, prompts: list[str], cfg: float) -> None:
        conditioning = _encode(component, prompts, cfg)
        assert isinstance(conditioning, Conditioning)
        for name, tensor in conditioning.tensors.items():
            assert tensor.shape[0] == len(prompts), f"{name}: the first dimension is the sample dimension"
        assert len(conditioning.index([1])) == 1

    @pytest.mark.parametrize("cfg", [1.0, 4.5])
    def test_velocity_is_shaped_like_latents_in_float32(
        self, component: DiffusionModel, image_size: tuple[int, int], prompts: list[str], cfg: float
    ) -> None:
        torch = torch_module()
        velocity = self._velocity(component, image_size, prompts, cfg)
        assert velocity.shape == (len(prompts), *component.latent_shape(*image_size))
        assert velocity.dtype == torch.float32
        assert torch.isfinite(velocity).all()

    @pytest.mark.parametrize("cfg", [1.0, 4.5])
    def test_velocity_does_not_depend_on_batching(
        self, component: DiffusionModel, image_size: tuple[int, int], prompts: list[str], cfg: float
    ) -> None:
        """Prompts encoded one at a time and joined with ``Conditioning.concat`` (as the rollout backend does; text
        of different lengths is right-padded with zeros) give each sample the velocity it gets alone."""
        torch = torch_module()
        parts = [_encode(component, [p], cfg, seed=k) for k, p in enumerate(prompts)]
        joined = Conditioning.concat(parts)
        latents = self._latents(component, image_size, len(prompts))
        sigmas = torch.linspace(0.9, 0.3, len(prompts), device=component.device)
        with torch.no_grad():
            together = component.predict_velocity(latents, sigmas, joined, cfg)
            for i, part in enumerate(parts):
                alone = component.predict_velocity(latents[i : i + 1], sigmas[i : i + 1], part, cfg)
                torch.testing.assert_close(together[i : i + 1], alone, rtol=1e-5, atol=1e-5)

    def test_decode_gives_uint8_images(self, component: DiffusionModel, image_size: tuple[int, int]) -> None:
        torch = torch_module()
        with torch.no_grad():
            images = component.decode(self._latents(component, image_size, 2))
        assert images.dtype == torch.uint8
        if _is_video(component):  # (B, F, H, W, 3): at least one frame
            assert images.ndim == 5 and images.shape[0] == 2 and images.shape[1] >= 1
            assert tuple(images.shape[2:]) == (*image_size, 3)
        else:
            assert tuple(images.shape) == (2, *image_size, 3)

    def test_trainable_parameters_require_grad(self, component: DiffusionModel) -> None:
        parameters = component.trainable_parameters()
        assert parameters, "nothing to train"
        assert all(p.requires_grad for p in parameters)

    def test_disabled_adapters_are_the_reference_policy(
        self, component: DiffusionModel, image_size: tuple[int, int], prompts: list[str]
    ) -> None:
        torch = torch_module()
        self._perturb_lora(component, seed=1)
        with_lora = self._velocity(component, image_size, prompts, 1.0)
        with component.disable_adapters():
            reference = self._velocity(component, image_size, prompts, 1.0)
        assert not torch.allclose(reference, with_lora), "disabling the adapters changed nothing"
        torch.testing.assert_close(self._velocity(component, image_size, prompts, 1.0), with_lora)

    def test_save_and_load_lora_round_trip(
        self, component: DiffusionModel, image_size: tuple[int, int], prompts: list[str], tmp_path: Path
    ) -> None:
        torch = torch_module()
        self._perturb_lora(component, seed=1)
        saved = self._velocity(component, image_size, prompts, 1.0)
        component.save_lora(tmp_path)
        assert (tmp_path / "pytorch_lora_weights.safetensors").is_file()
        self._perturb_lora(component, seed=2)
        assert not torch.allclose(self._velocity(component, image_size, prompts, 1.0), saved)
        component.load_lora(tmp_path)
        torch.testing.assert_close(self._velocity(component, image_size, prompts, 1.0), saved)


def _is_video(model: DiffusionModel) -> bool:
    """A video model (docs/hooks.md, "Video"): latents with a frame axis, decode to (B, F, H, W, 3)."""
    return getattr(model, "modality", "image") == "video"


def _sources(model: Any, seed: int) -> tuple[Any, ...]:
    """Random uint8 (H, W, 3) condition images for one prompt, as many as the model needs (at least one): sizes
    differ with the seed, so joined conditionings of different lengths are covered too."""
    import numpy as np

    fewest, most = getattr(model, "condition_images", (0, 0))
    rng = np.random.default_rng(seed)
    size = (64 + 16 * (seed % 2), 64)
    return tuple(rng.integers(0, 256, (*size, 3), dtype=np.uint8) for _ in range(max(1, fewest) if most else 0))


def _encode(model: Any, prompts: list[str], cfg: float, seed: int = 0) -> Conditioning:
    """The prompts' conditioning as the rollout backend makes it: with condition images for a model that takes
    them (``encode_conditions``), else ``encode_prompts``."""
    if getattr(model, "condition_images", (0, 0))[1]:
        images = [_sources(model, seed + k) for k in range(len(prompts))]
        return model.encode_conditions(prompts, images, guidance_scale=cfg)
    return model.encode_prompts(prompts, guidance_scale=cfg)
