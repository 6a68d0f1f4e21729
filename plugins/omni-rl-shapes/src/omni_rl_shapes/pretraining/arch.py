"""The architecture-specific parts of the shapes pretraining, one class per pipeline architecture.

:mod:`pretrain` runs one recipe for every architecture: a VAE autoencoder stage, the rectified-flow transformer
stage on cached latents and prompt embeddings, val evaluations scored by the verifier with the stop rule, and
continued (clean, annealing, stray-object) stages. What differs between SD3 and Qwen-Image is kept here, so the
recipe reads the same for both and a third architecture is one more class (the Wan motion model's, in
:mod:`.wan`, which also trains on clips instead of still scenes: its ``world``):

- building the tiny random pipeline (a size whose directory stays <= 20 MB and whose training step costs about
  the same: ~2.4M transformer weights, 32 px images, 64 image tokens);
- loading it (SD3: ``StableDiffusion3Pipeline``; Qwen-Image: omni-rl's ``qwen_image`` model by path, the very
  object an RL run trains, so pretraining, its evaluation and RL share one text path and one velocity);
- the VAE seen as an image autoencoder, and how its latents are standardised (SD3: one ``shift_factor`` and
  ``scaling_factor``; Qwen-Image: per-channel ``latents_mean`` / ``latents_std``, as the real VAE ships them);
- the prompt conditioning and the transformer call (SD3: embeddings + pooled projections, empty prompt for CFG;
  Qwen-Image: the pipeline's ``encode_prompt`` with its chat template, masks, 2x2 packed latents, and the model's
  negative prompt " " as the unconditional one, since that is what its true CFG samples against);
- the time shift of the training sigmas (SD3: the scheduler's constant shift 3; Qwen-Image: exp(mu) with mu the
  scheduler's resolution-dependent dynamic shift for the image token count, so training concentrates on the noise
  levels its sampler visits);
- sampling val images (SD3: the pipeline's ``__call__``; Qwen-Image: the Euler ODE over the model's own schedule).

omni-rl-qwen-image is an optional dependency of omni-rl-shapes: :func:`architecture` imports it only for
``qwen_image`` and says how to install it when it is missing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

import attrs
import numpy as np

from omni_rl_shapes.evaluate import SamplingSettings, model_val_reward, val_reward
from omni_rl_shapes.pretraining.vae import calibrate_latents, encode, to_tensor
from omni_rl_shapes.pretraining.world import ImageWorld, World

#: the values of ``--arch``
ARCHITECTURES = ("sd3", "qwen_image", "wan")
#: the values of ``--save-dtype``
SAVE_DTYPES = ("float32", "float16", "bfloat16")

#: what to install for ``--arch qwen_image`` (the optional extra of omni-rl-shapes)
QWEN_IMAGE_INSTALL_HINT = "pip install 'omni-rl-shapes[qwen-image]' (or pip install -e plugins/omni-rl-qwen-image)"
#: what to install for ``--arch wan`` (the optional extra of omni-rl-shapes)
WAN_INSTALL_HINT = "pip install 'omni-rl-shapes[wan]' (or pip install -e plugins/omni-rl-wan)"

#: velocity(x_t (B, C, h, w), sigma (B,), prompt rows (B,)) -> prediction shaped like x_t
Velocity = Callable[[Any, Any, Any], Any]


class Architecture(Protocol):
    """What :mod:`pretrain` needs from an architecture; ``handle`` is whatever :meth:`load` returns."""

    name: str
    #: the diffusers pipeline class of its directories (model_index.json's ``_class_name``)
    pipeline_class: str
    #: what it is trained on and scored by: still scenes or motion clips (:mod:`.world`)
    world: World

    def sampling_overrides(self) -> dict[str, Any]:
        """How its val samples differ from :class:`SamplingSettings`' defaults (clips: ``num_frames``)."""
        ...

    @property
    def image_size(self) -> int: ...

    def shape_record(self) -> dict[str, Any]: ...

    def build(self, directory: Path, seed: int) -> Path: ...

    def load(self, directory: Path, sampling: SamplingSettings) -> Any: ...

    def vae(self, handle: Any) -> Any: ...

    def calibrate(self, handle: Any, images: np.ndarray) -> dict[str, Any]: ...

    def encode_images(self, handle: Any, images: np.ndarray) -> Any: ...

    def transformer(self, handle: Any) -> Any: ...

    def velocity(self, handle: Any, prompts: Sequence[str], sampling: SamplingSettings) -> Velocity: ...

    def shift(self, handle: Any) -> float: ...

    def val_reward(
        self, handle: Any, prompts: Sequence[str], sampling: SamplingSettings, grid_path: Path | None
    ) -> dict[str, float]: ...


def save_trained(transformer: Any, vae: Any, directory: Path, dtype: Any) -> None:
    """Save the transformer and VAE (every architecture's handle has both as ``.transformer`` / ``.vae``) in
    ``dtype`` over the pipeline directory's; they are cast in place, so this is the run's last use of them.

    float16 halves what ships; the loaders (``from_pretrained`` with ``torch_dtype=float32``, the model plugins'
    default) upcast it exactly, so the pipeline then computes with the float16-rounded weights in float32.
    """
    for name, module in (("transformer", transformer), ("vae", vae)):
        if module.dtype != dtype:  # diffusers warns on every .to(dtype), a no-op one too
            module.to(dtype)
        module.save_pretrained(directory / name, safe_serialization=True)


def architecture(name: str) -> Architecture:
    """The adapter for ``--arch name``; ``qwen_image`` and ``wan`` raise ImportError with the install command
    when their model plugin is missing (omni-rl-shapes does not depend on them). ``wan`` is the motion model
    (:mod:`.wan`)."""
    if name == "sd3":
        return Sd3Architecture()
    if name == "qwen_image":
        try:
            importlib.import_module("omni_rl_qwen_image")
        except ImportError as error:
            raise ImportError(
                "--arch qwen_image needs the omni-rl-qwen-image plugin, which is not installed; "
                + QWEN_IMAGE_INSTALL_HINT
            ) from error
        return QwenImageArchitecture()
    if name == "wan":
        try:
            importlib.import_module("omni_rl_wan")
        except ImportError as error:
            raise ImportError(
                "--arch wan needs the omni-rl-wan plugin, which is not installed; " + WAN_INSTALL_HINT
            ) from error
        from omni_rl_shapes.pretraining.wan import WanArchitecture

        return WanArchitecture()
    raise ValueError(f"unknown architecture {name!r}; choose one of {', '.join(ARCHITECTURES)}")


# -- SD3 -----------------------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ModelShape:
    """Arguments for ``build_tiny_sd3_pipeline``: ~2.3M transformer parameters, ~11 MB on disk in all."""

    num_layers: int = 4
    num_attention_heads: int = 4
    attention_head_dim: int = 32
    #: latent side; images are twice that (the VAE has two blocks, one 2x downsampling)
    sample_size: int = 16
    vae_block_out_channels: tuple[int, ...] = (32, 32)
    #: SD3.5's per-head RMS norm of q and k: keeps attention logits tame at a high learning rate
    qk_norm: str = "rms_norm"

    @property
    def image_size(self) -> int:
        return self.sample_size * 2 ** (len(self.vae_block_out_channels) - 1)


@attrs.frozen
class Sd3Architecture:
    """The shipped model's architecture: ``StableDiffusion3Pipeline`` (the handle is the pipeline)."""

    shape: ModelShape = ModelShape()
    name: str = "sd3"
    pipeline_class: str = "StableDiffusion3Pipeline"
    world: ImageWorld = attrs.field(factory=ImageWorld)

    def sampling_overrides(self) -> dict[str, Any]:
        return {}

    @property
    def image_size(self) -> int:
        return self.shape.image_size

    def shape_record(self) -> dict[str, Any]:
        return attrs.asdict(self.shape)

    def build(self, directory: Path, seed: int) -> Path:
        from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

        return build_tiny_sd3_pipeline(directory, seed=seed, **attrs.asdict(self.shape))

    def load(self, directory: Path, sampling: SamplingSettings) -> Any:
        from diffusers import StableDiffusion3Pipeline

        pipe = StableDiffusion3Pipeline.from_pretrained(directory)
        pipe.set_progress_bar_config(disable=True)
        return pipe

    def vae(self, handle: Any) -> Any:
        return handle.vae

    def calibrate(self, handle: Any, images: np.ndarray) -> dict[str, Any]:
        shift, scale = calibrate_latents(handle.vae, images)
        return {"shift_factor": shift, "scaling_factor": scale}

    def encode_images(self, handle: Any, images: np.ndarray) -> Any:
        return encode(handle.vae, images)

    def transformer(self, handle: Any) -> Any:
        return handle.transformer

    def velocity(self, handle: Any, prompts: Sequence[str], sampling: SamplingSettings) -> Velocity:
        """Rows: the prompts, then the empty prompt (the SD3 pipeline's negative prompt for CFG)."""
        embeds, pooled = _sd3_prompt_embeddings(handle, [*prompts, ""], sampling.max_sequence_length)
        transformer = handle.transformer

        def velocity(x_t: Any, sigma: Any, ids: Any) -> Any:
            return transformer(
                hidden_states=x_t,
                timestep=sigma * 1000.0,
                encoder_hidden_states=embeds[ids],
                pooled_projections=pooled[ids],
                return_dict=False,
            )[0]

        return velocity

    def shift(self, handle: Any) -> float:
        return float(handle.scheduler.config.shift)

    def val_reward(
        self, handle: Any, prompts: Sequence[str], sampling: SamplingSettings, grid_path: Path | None
    ) -> dict[str, float]:
        return val_reward(handle, prompts, sampling, grid_path=grid_path)


def _sd3_prompt_embeddings(pipe: Any, prompts: Sequence[str], max_sequence_length: int) -> tuple[Any, Any]:
    import torch

    embeds, pooled = [], []
    with torch.no_grad():
        for start in range(0, len(prompts), 64):
            e, _, p, _ = pipe.encode_prompt(
                prompt=list(prompts[start : start + 64]),
                prompt_2=None,
                prompt_3=None,
                do_classifier_free_guidance=False,
                max_sequence_length=max_sequence_length,
            )
            embeds.append(e)
            pooled.append(p)
    return torch.cat(embeds), torch.cat(pooled)


# -- Qwen-Image ----------------------------------------------------------------------------------------------------


def qwen_image_shape() -> Any:
    """The tiny Qwen-Image's size, matched to the SD3 one: 4 dual-stream blocks of width 128 (4 heads x 32; ~2.5M
    weights, the SD3 transformer's 36 d^2 per block), RoPE axes (4, 14, 14) in Qwen-Image's proportions, a 2x VAE
    of base width 16 (32 px images <-> 16x16x16 latents, 64 image tokens after 2x2 packing, as SD3's 2x2 patches),
    and a 2-layer Qwen2.5-VL text encoder of width 64. ~12 MB on disk."""
    from omni_rl_qwen_image.tiny import TinyQwenImageShape

    return TinyQwenImageShape(
        num_layers=4,
        num_attention_heads=4,
        attention_head_dim=32,
        axes_dims_rope=(4, 14, 14),
        latent_channels=16,
        vae_base_dim=16,
        vae_dim_mult=(1, 2),
        text_hidden_size=64,
        text_layers=2,
        text_heads=4,
        text_kv_heads=2,
    )


class FrameAxisVAE:
    """``AutoencoderKLQwenImage`` (a video VAE: (B, C, T, H, W)) seen as an image VAE, one frame, so the SD3
    autoencoder stage (:func:`.vae.train_vae`) trains it unchanged: ``encode(x).latent_dist`` is a
    posterior over (B, C, h, w) (its KL summed over all latent elements, as for SD3's 4-D latents) and
    ``decode(z).sample`` an image batch."""

    def __init__(self, vae: Any) -> None:
        self.vae = vae

    def encode(self, images: Any) -> Any:
        from diffusers.models.autoencoders.vae import DiagonalGaussianDistribution

        posterior = self.vae.encode(images.unsqueeze(2)).latent_dist
        return SimpleNamespace(latent_dist=DiagonalGaussianDistribution(posterior.parameters[:, :, 0]))

    def decode(self, latents: Any) -> Any:
        return SimpleNamespace(sample=self.vae.decode(latents.unsqueeze(2)).sample[:, :, 0])

    def parameters(self) -> Any:
        return self.vae.parameters()

    def train(self) -> FrameAxisVAE:
        self.vae.train()
        return self

    def eval(self) -> FrameAxisVAE:
        self.vae.eval()
        return self

    def requires_grad_(self, requires_grad: bool = True) -> FrameAxisVAE:
        self.vae.requires_grad_(requires_grad)
        return self


@attrs.frozen
class QwenImageArchitecture:
    """``QwenImagePipeline`` layout; the handle is omni-rl's ``QwenImageModel`` (full fine-tuning, float32, CPU)
    loaded by path, whose ``pipeline`` holds the components that are trained and saved."""

    shape: Any = attrs.field(factory=qwen_image_shape)
    #: latent side (16: 64 image tokens after 2x2 packing)
    latent_size: int = 16
    name: str = "qwen_image"
    pipeline_class: str = "QwenImagePipeline"
    world: ImageWorld = attrs.field(factory=ImageWorld)

    def sampling_overrides(self) -> dict[str, Any]:
        return {}

    @property
    def image_size(self) -> int:
        return self.latent_size * self.shape.vae_scale_factor

    def shape_record(self) -> dict[str, Any]:
        return attrs.asdict(self.shape)

    def build(self, directory: Path, seed: int) -> Path:
        from omni_rl_qwen_image.tiny import build_tiny_qwen_image_pipeline

        return build_tiny_qwen_image_pipeline(directory, seed=seed, shape=self.shape)

    def load(self, directory: Path, sampling: SamplingSettings) -> Any:
        """The ``qwen_image`` model built by name from the registry, as a run's config builds it."""
        import omni_rl
        from omni_rl.context import BuildContext

        options = {"path": str(directory), "lora_rank": 0, "max_sequence_length": sampling.max_sequence_length}
        return omni_rl.build("model", "qwen_image", options, BuildContext(device="cpu"))

    def vae(self, handle: Any) -> Any:
        return FrameAxisVAE(handle.vae)

    def calibrate(self, handle: Any, images: np.ndarray) -> dict[str, Any]:
        """Per-channel ``latents_mean`` / ``latents_std`` of the posterior means of ``images``: the model's latents
        ``(z - mean) / std`` then have zero mean and unit variance per channel, as the real VAE's statistics make
        them on real images."""
        import torch

        with torch.no_grad():
            z = FrameAxisVAE(handle.vae).encode(to_tensor(images)).latent_dist.mean
        mean = z.mean(dim=(0, 2, 3)).tolist()
        std = z.std(dim=(0, 2, 3)).tolist()
        handle.vae.register_to_config(latents_mean=mean, latents_std=std)
        return {"latents_mean": mean, "latents_std": std}

    def encode_images(self, handle: Any, images: np.ndarray, batch_size: int = 64) -> Any:
        """Model-space latents through the model's own ``encode_images`` (posterior mode, per-channel stats)."""
        import torch

        batches = range(0, len(images), batch_size)
        parts = [handle.encode_images(torch.from_numpy(images[i : i + batch_size])) for i in batches]
        return torch.cat(parts)

    def transformer(self, handle: Any) -> Any:
        return handle.transformer

    def velocity(self, handle: Any, prompts: Sequence[str], sampling: SamplingSettings) -> Velocity:
        """Rows: the prompts, then the model's negative prompt (" "), all through the pipeline's ``encode_prompt``
        (template dropped, per-prompt lengths, padding mask); the prediction is the model's ``predict_velocity``
        without CFG, the call RL's loss makes."""
        from omni_rl_qwen_image.prompts import POSITIVE

        from omni_rl.batch import Conditioning

        embeds, mask = handle.prompts.encode([*prompts, handle.config.negative_prompt])

        def velocity(x_t: Any, sigma: Any, ids: Any) -> Any:
            conditioning = Conditioning({POSITIVE: embeds[ids], f"{POSITIVE}_mask": mask[ids]})
            return handle.predict_velocity(x_t, sigma, conditioning, 1.0)

        return velocity

    def shift(self, handle: Any) -> float:
        """exp(mu), mu = the scheduler's dynamic shift for this image token count (``calculate_shift``, as the
        pipeline and :meth:`QwenImageModel.sigma_schedule` compute it); the sampler's terminal stretch to 0.02
        only rescales the last steps of a discrete schedule and is left out of the continuous draw."""
        import math

        from diffusers.pipelines.qwenimage.pipeline_qwenimage import calculate_shift

        config = handle.pipeline.scheduler.config
        tokens = (self.latent_size // 2) ** 2
        mu = calculate_shift(
            tokens,
            config.get("base_image_seq_len", 256),
            config.get("max_image_seq_len", 4096),
            config.get("base_shift", 0.5),
            config.get("max_shift", 1.15),
        )
        return math.exp(mu)

    def val_reward(
        self, handle: Any, prompts: Sequence[str], sampling: SamplingSettings, grid_path: Path | None
    ) -> dict[str, float]:
        return model_val_reward(handle, prompts, sampling, grid_path=grid_path)
