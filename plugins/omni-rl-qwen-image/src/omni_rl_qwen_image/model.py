"""``QwenImageModel``: Qwen-Image as an omni-rl :class:`~omni_rl.protocols.DiffusionModel`.

Every number it produces is computed the way ``QwenImagePipeline.__call__`` computes it: prompts through the
pipeline's own ``encode_prompt`` (chat template, template tokens dropped, per-prompt lengths with a padding mask),
2x2-packed latents with ``img_shapes``, timestep = (sigma x 1000) / 1000, the scheduler's sigmas with the
resolution-dependent shift mu = calculate_shift(image tokens), positive and negative prompts in two transformer
calls combined by true CFG with the per-token norm rescaling, and the VAE's latent mean/std and postprocess. So an
Euler loop over :meth:`sigma_schedule` with :meth:`predict_velocity` reproduces the pipeline's output for the same
seed. Rollout and training use the same :meth:`predict_velocity`, which is what makes the on-policy ratio 1.

The CFG arithmetic runs in float32 (MATH.md): under bf16 weights that is a rounding away from the pipeline, which
combines in the weights' dtype. All modules stay in eval mode (Qwen-Image has no dropout; LoRA dropout is 0).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import torch

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_qwen_image.config import QwenImageConfig
from omni_rl_qwen_image.latents import pack, true_cfg, unpack
from omni_rl_qwen_image.loading import load_pipeline, resolve_pipeline_path
from omni_rl_qwen_image.lora import TRAINED_ADAPTER, QwenLoraAdapters
from omni_rl_qwen_image.prompts import NEGATIVE, POSITIVE, PromptEncoder, trimmed
from omni_rl_qwen_image.training_state import FullTransformerFiles

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


class QwenImageModel:
    """A loaded Qwen-Image pipeline whose transformer is trained (LoRA by default), inside one policy worker."""

    def __init__(self, config: QwenImageConfig, ctx: BuildContext | None = None) -> None:
        ctx = ctx or BuildContext()
        self.config = config
        #: the local directory (or hub id) the weights came from
        self.pipeline_path: str = resolve_pipeline_path(config)
        self.device = torch.device(ctx.device)
        self.dtype = _DTYPES[config.dtype]
        #: the loaded pipeline; its modules are the ones this model runs and trains
        self.pipeline = load_pipeline(attrs.evolve(config, build_tiny_if_missing=False), self.pipeline_path)
        self.transformer = self.pipeline.transformer
        if self.transformer.config.guidance_embeds:
            raise ConfigError(
                f"{self.pipeline_path} holds a guidance-distilled Qwen-Image transformer (guidance_embeds = true)",
                hint="the qwen_image model trains the true-CFG Qwen-Image; use a pipeline without guidance embeddings",
            )
        self.transformer.to(self.device)
        self.vae = self.pipeline.vae
        self.vae.to("cpu" if config.offload_vae else self.device)
        self.pipeline.text_encoder.to("cpu" if config.offload_text_encoder else self.device)
        for module in (self.vae, self.pipeline.text_encoder):
            module.requires_grad_(False).eval()
        self.transformer.requires_grad_(config.lora_rank == 0).eval()
        self.adapters: QwenLoraAdapters | None = None
        if config.lora_rank > 0:
            self.adapters = QwenLoraAdapters(self.transformer, config, seed=ctx.seed)
        #: full fine-tuning only: a frozen copy of the transformer kept by :meth:`keep_reference_copy`
        self.reference_transformer: Any = None
        if config.gradient_checkpointing:
            self.transformer.enable_gradient_checkpointing()
        self.prompts = PromptEncoder(
            self.pipeline,
            device=self.device,
            max_sequence_length=config.max_sequence_length,
            cache_size=config.prompt_cache_size,
            offload=config.offload_text_encoder,
        )
        self.vae_scale_factor: int = self.pipeline.vae_scale_factor
        self.latent_channels: int = self.transformer.config.in_channels // 4
        self.num_train_timesteps: int = self.pipeline.scheduler.config.num_train_timesteps
        #: transformer forwards so far (one per prompt set per step; tests check CFG costs two, no CFG one)
        self.transformer_calls = 0

    # -- protocol: conditioning and velocity -----------------------------------------------------------------

    def encode_prompts(self, prompts: Sequence[str], *, guidance_scale: float) -> Conditioning:
        """Qwen2.5-VL embeddings with a padding mask; the negative prompt's too when ``guidance_scale > 1``."""
        if not prompts:
            raise RuntimeFailure("encode_prompts got no prompts", hint="pass at least one prompt")
        embeds, mask = self.prompts.encode(list(prompts))
        tensors = {POSITIVE: embeds, f"{POSITIVE}_mask": mask}
        if guidance_scale > 1:
            negative = self.config.negative_prompt
            neg_embeds, neg_mask = self.prompts.encode([negative] * len(prompts), keep=[negative])
            tensors[NEGATIVE], tensors[f"{NEGATIVE}_mask"] = neg_embeds, neg_mask
        return Conditioning({k: v.to(self.device) for k, v in tensors.items()})

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        """v(x, sigma): the positive prediction alone when ``guidance_scale <= 1`` (one transformer call), else
        true CFG over a positive and a negative call. Float32, shaped like ``latents``, differentiable w.r.t. the
        trained weights when called under grad."""
        batch, _, height, width = latents.shape
        tokens = pack(latents.to(self.device, self.dtype))
        sigma = torch.as_tensor(sigmas, dtype=torch.float32, device=self.device).reshape(-1)
        if sigma.numel() == 1:
            sigma = sigma.expand(batch)
        # the pipeline passes the scheduler's timestep (sigma * 1000, float32) cast to the latents' dtype, / 1000
        timestep = (sigma * self.num_train_timesteps).to(self.dtype) / self.num_train_timesteps
        img_shapes = [[(1, height // 2, width // 2)]] * batch
        positive = self._forward(tokens, timestep, img_shapes, *self._text(conditioning, POSITIVE, batch))
        if guidance_scale > 1:
            negative = self._forward(tokens, timestep, img_shapes, *self._text(conditioning, NEGATIVE, batch))
            velocity = true_cfg(positive.float(), negative.float(), guidance_scale)
        else:
            velocity = positive.float()
        return unpack(velocity, height, width)

    def _forward(
        self, tokens: torch.Tensor, timestep: torch.Tensor, img_shapes: list, embeds: torch.Tensor, mask: Any
    ) -> torch.Tensor:
        self.transformer_calls += 1
        return self.transformer(
            hidden_states=tokens,
            timestep=timestep,
            encoder_hidden_states=embeds,
            encoder_hidden_states_mask=mask,
            img_shapes=img_shapes,
            return_dict=False,
        )[0]

    def _text(self, conditioning: Conditioning, key: str, batch: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        tensors = conditioning.tensors
        if key not in tensors or f"{key}_mask" not in tensors:
            raise RuntimeFailure(
                f"Qwen-Image conditioning lacks {key!r}",
                hint="encode the prompts with the guidance scale used for sampling (the negative prompt is encoded "
                "only when guidance_scale > 1)",
            )
        embeds, mask = tensors[key], tensors[f"{key}_mask"]
        if embeds.shape[0] != batch:
            raise RuntimeFailure(
                f"conditioning has {embeds.shape[0]} samples but the latents have {batch}",
                hint="index the Conditioning with the same samples as the latents",
            )
        embeds, kept = trimmed(embeds.to(self.device, self.dtype), mask.to(self.device))
        return embeds, kept

    # -- protocol: schedule, shapes, images ------------------------------------------------------------------

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> torch.Tensor:
        """The pipeline's sigmas: linspace(1, 1/n, n) through the scheduler with mu = calculate_shift(image tokens)
        (the exponential resolution-dependent shift, then the terminal stretch), trailing 0; float32, (n + 1,)."""
        import numpy as np
        from diffusers.pipelines.qwenimage.pipeline_qwenimage import calculate_shift

        if num_steps < 1:
            raise ConfigError(f"num_steps must be >= 1, got {num_steps}", hint="set [rollout] steps >= 1")
        _, h, w = self.latent_shape(height, width)
        source = self.pipeline.scheduler
        scheduler = type(source).from_config(source.config)  # a private copy: set_timesteps mutates state
        config = scheduler.config
        mu = calculate_shift(
            (h // 2) * (w // 2),
            config.get("base_image_seq_len", 256),
            config.get("max_image_seq_len", 4096),
            config.get("base_shift", 0.5),
            config.get("max_shift", 1.15),
        )
        scheduler.set_timesteps(sigmas=np.linspace(1.0, 1 / num_steps, num_steps), device="cpu", mu=mu)
        return scheduler.sigmas.to(device=self.device, dtype=torch.float32)

    def latent_shape(self, height: int, width: int) -> tuple[int, int, int]:
        """(16, H / 8, W / 8) for real Qwen-Image; sizes must be whole 2x2 latent patches."""
        multiple = self.vae_scale_factor * 2
        if height <= 0 or width <= 0 or height % multiple or width % multiple:
            raise ConfigError(
                f"image size {height}x{width} is not supported by this Qwen-Image pipeline",
                hint=f"height and width must be positive multiples of {multiple} (VAE factor "
                f"{self.vae_scale_factor} x 2x2 latent packing)",
            )
        return (self.latent_channels, height // self.vae_scale_factor, width // self.vae_scale_factor)

    def _latent_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, 1 / std) shaped (1, C, 1, 1, 1), as the pipeline builds them."""
        config = self.vae.config
        mean = torch.tensor(config.latents_mean).view(1, config.z_dim, 1, 1, 1)
        inverse_std = 1.0 / torch.tensor(config.latents_std).view(1, config.z_dim, 1, 1, 1)
        return mean, inverse_std

    @contextmanager
    def _vae_on_device(self) -> Iterator[Any]:
        if not self.config.offload_vae:
            yield self.vae
            return
        self.vae.to(self.device)
        try:
            yield self.vae
        finally:
            self.vae.to("cpu")

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> uint8 (B, H, W, 3), as the pipeline's ``output_type="np"`` times 255, rounded."""
        with self._vae_on_device() as vae:
            z = latents.to(self.device, vae.dtype).unsqueeze(2)
            mean, inverse_std = (t.to(z.device, z.dtype) for t in self._latent_stats())
            image = vae.decode(z / inverse_std + mean, return_dict=False)[0][:, :, 0]
            image = self.pipeline.image_processor.postprocess(image, output_type="pt")
        return (image.permute(0, 2, 3, 1).float() * 255).round().to(torch.uint8)

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, H, W, 3) -> float32 latents (B, C, h, w): the VAE posterior's mean, normalised as the
        Qwen-Image img2img pipelines do, ``(z - mean) / std`` (optional protocol member, offline preference data)."""
        if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[-1] != 3:
            raise RuntimeFailure(
                f"encode_images takes uint8 images of shape (B, H, W, 3), got {images.dtype} {tuple(images.shape)}",
                hint="pass images as decode returns them",
            )
        self.latent_shape(int(images.shape[1]), int(images.shape[2]))  # raises for sizes the model cannot take
        with self._vae_on_device() as vae:
            pixels = images.to(self.device).permute(0, 3, 1, 2).float() / 255.0 * 2.0 - 1.0
            posterior = vae.encode(pixels.unsqueeze(2).to(vae.dtype), return_dict=False)[0]
            mean, inverse_std = (t.to(pixels.device, vae.dtype) for t in self._latent_stats())
            z = (posterior.mode() - mean) * inverse_std
        return z[:, :, 0].float()

    # -- protocol: training state ----------------------------------------------------------------------------

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The trained adapter's LoRA weights (float32), or every transformer weight when ``lora_rank = 0``."""
        if self.adapters is None:
            return list(self.transformer.parameters())
        return self.adapters.trained_parameters()

    def fsdp_units(self) -> list[torch.nn.Module]:
        """Optional protocol member: one FSDP2 unit per dual-stream block (60 in the real model), the transformer
        itself (input/output projections, time embedding) the root unit."""
        return list(self.transformer.transformer_blocks)

    @contextmanager
    def disable_adapters(self) -> Iterator[None]:
        """The reference policy: adapters off (restored on exit); under full fine-tuning the frozen copy
        :meth:`keep_reference_copy` kept."""
        if self.adapters is None and self.reference_transformer is not None:
            trained, self.transformer = self.transformer, self.reference_transformer
            try:
                yield
            finally:
                self.transformer = trained
            return
        with self._require_adapters("the reference view (adapters off)").disabled():
            yield

    def keep_reference_copy(self) -> None:
        """Optional protocol member: with ``lora_rank = 0`` keep a frozen copy of the transformer as it is now (the
        reference policy of :meth:`disable_adapters`); a no-op with LoRA, where adapters off is the reference."""
        if self.adapters is not None or self.reference_transformer is not None:
            return
        import copy

        self.reference_transformer = copy.deepcopy(self.transformer).requires_grad_(False).eval()

    def save_lora(self, directory: str | Path) -> None:
        """``pytorch_lora_weights.safetensors`` (diffusers Qwen-Image format); with ``lora_rank = 0`` the whole
        transformer under ``directory/transformer``. A collective under FSDP2 (rank 0 writes)."""
        if self.adapters is None:
            FullTransformerFiles(self.transformer).save(directory)
            return
        self.adapters.save(directory, name=TRAINED_ADAPTER)

    def load_lora(self, directory: str | Path) -> None:
        """Load weights written by :meth:`save_lora` into the trained adapter (or the full transformer)."""
        if self.adapters is None:
            FullTransformerFiles(self.transformer).load(directory, dtype=self.dtype)
            return
        self.adapters.load(directory, name=TRAINED_ADAPTER)

    # -- extra adapters (DiffusionNFT's "old", AWM's "ema") -----------------------------------------------------

    def add_adapter(self, name: str, *, copy_from: str | None = TRAINED_ADAPTER) -> None:
        """Add a frozen LoRA adapter with the trained one's config, by default a copy of it."""
        self._require_adapters(f"adapter {name!r}").add(name, copy_from=copy_from)

    def use_adapter(self, name: str) -> Any:
        """Context in which forwards use adapter ``name`` instead of the trained one."""
        return self._require_adapters(f"adapter {name!r}").use(name)

    def blend_adapter(self, target: str, source: str = TRAINED_ADAPTER, *, decay: float) -> None:
        """``target <- decay * target + (1 - decay) * source``."""
        self._require_adapters(f"adapter {target!r}").blend(target, source, decay=decay)

    def _require_adapters(self, what: str) -> QwenLoraAdapters:
        if self.adapters is None:
            raise RuntimeFailure(
                f"{what} needs LoRA, but this Qwen-Image model fine-tunes the full transformer (lora_rank = 0)",
                hint="set [model] options.lora_rank > 0, or use a loss without a reference/old policy view",
            )
        return self.adapters

    # -- export ------------------------------------------------------------------------------------------------

    def build_pipeline(self) -> Any:
        """A ``QwenImagePipeline`` sharing this model's modules (the current policy, LoRA on) with its own
        scheduler instance, for export, visual checks and tests."""
        from diffusers import QwenImagePipeline

        components = dict(self.pipeline.components)
        scheduler = components["scheduler"]
        components["scheduler"] = type(scheduler).from_config(scheduler.config)
        return QwenImagePipeline(**components)

    def export_pipeline(self, directory: str | Path, *, merged: bool) -> None:
        """Write the current policy for use without omni-rl (``omni-rl export``): the LoRA for
        ``QwenImagePipeline.load_lora_weights`` or, ``merged``, the whole pipeline with the LoRA fused into a copy of
        the transformer (``DiffusionPipeline.from_pretrained(directory)``, no peft needed)."""
        if not merged:
            if self.adapters is None:
                raise RuntimeFailure(
                    "this Qwen-Image model fine-tunes the full transformer (lora_rank = 0): there is no LoRA to export",
                    hint="export the merged pipeline instead (omni-rl export ... --merged)",
                )
            self.save_lora(directory)
            return
        pipeline = self.build_pipeline()
        pipeline.transformer = self._merged_transformer()
        pipeline.save_pretrained(Path(directory), safe_serialization=True)

    def _merged_transformer(self) -> Any:
        """A copy of the transformer with the trained adapter fused in and every adapter removed."""
        import copy

        if self.adapters is None:
            return self.transformer
        merged = copy.deepcopy(self.transformer)
        others = [name for name in merged.peft_config if name != TRAINED_ADAPTER]
        if others:  # e.g. DiffusionNFT's "old" policy: not part of the exported model
            merged.delete_adapters(others)
        try:
            merged.fuse_lora(safe_fusing=True, adapter_names=[TRAINED_ADAPTER])
        except ValueError as error:
            raise RuntimeFailure(
                f"cannot merge the LoRA into the transformer: {error}",
                hint="the checkpoint holds non-finite LoRA weights; export an earlier step (--step N)",
            ) from error
        merged.unload_lora()
        return merged.requires_grad_(False)


def build_qwen_image_model(config: QwenImageConfig, ctx: BuildContext) -> QwenImageModel:
    """The ``qwen_image`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return QwenImageModel(config, ctx)
