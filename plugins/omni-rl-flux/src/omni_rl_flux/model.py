"""``FluxModel``: FLUX.1 as an omni-rl :class:`~omni_rl.protocols.DiffusionModel`.

Every number it produces is computed the way ``FluxPipeline.__call__`` computes it: prompts through the pipeline's
own ``encode_prompt`` (CLIP-L pooled + T5 padded to ``max_sequence_length``), 2x2-packed latents with the image
position ids of ``_prepare_latent_image_ids`` and all-zero text ids, timestep = (sigma x 1000 in the weights'
dtype) / 1000, the distilled guidance embedding (dev, Krea), classic CFG over a positive and a negative call when
the protocol's guidance scale is above 1 (``true_cfg_scale``), the scheduler's sigmas with the resolution-dependent
shift mu = calculate_shift(image tokens) when the scheduler uses it (not schnell), and the VAE's scaling/shift and
the image processor's postprocess. So an Euler loop over :meth:`sigma_schedule` with :meth:`predict_velocity`
reproduces the pipeline's output for the same seed. Rollout and training use the same :meth:`predict_velocity`,
which is what makes the on-policy ratio 1.

The CFG arithmetic runs in float32 (MATH.md): under bf16 weights that is a rounding away from the pipeline, which
combines in the weights' dtype. All modules stay in eval mode (FLUX has no dropout; LoRA dropout is 0).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import torch

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_flux.config import FluxConfig
from omni_rl_flux.guidance import distilled_guidance
from omni_rl_flux.latents import image_ids, pack, text_ids, unpack
from omni_rl_flux.loading import load_pipeline, resolve_pipeline_path
from omni_rl_flux.lora import TRAINED_ADAPTER, FluxLoraAdapters
from omni_rl_flux.prompts import NEGATIVE, POSITIVE, PromptEncoder
from omni_rl_flux.training_state import FullTransformerFiles

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
_log = logging.getLogger(__name__)


class FluxModel:
    """A loaded FLUX pipeline whose transformer is trained (LoRA by default), inside one policy worker."""

    def __init__(self, config: FluxConfig, ctx: BuildContext | None = None) -> None:
        ctx = ctx or BuildContext()
        self.config = config
        #: the local directory (or hub id) the weights came from
        self.pipeline_path: str = resolve_pipeline_path(config)
        self.device = torch.device(ctx.device)
        self.dtype = _DTYPES[config.dtype]
        #: the loaded pipeline; its modules are the ones this model runs and trains
        self.pipeline = load_pipeline(attrs.evolve(config, build_tiny_if_missing=False), self.pipeline_path)
        self.transformer = self.pipeline.transformer
        #: the embedded (distilled) guidance value of every transformer call; None without guidance embeddings
        self.guidance: float | None = distilled_guidance(
            config.guidance, guidance_embeds=bool(self.transformer.config.guidance_embeds), path=self.pipeline_path
        )
        self.transformer.to(self.device)
        self.vae = self.pipeline.vae
        self.vae.to("cpu" if config.offload_vae else self.device)
        encoders = (self.pipeline.text_encoder, self.pipeline.text_encoder_2)
        for module in encoders:
            module.to("cpu" if config.offload_text_encoders else self.device)
        for module in (self.vae, *encoders):
            module.requires_grad_(False).eval()
        self.transformer.requires_grad_(config.lora_rank == 0).eval()
        self.adapters: FluxLoraAdapters | None = None
        if config.lora_rank > 0:
            self.adapters = FluxLoraAdapters(self.transformer, config, seed=ctx.seed)  # type: ignore[arg-type]
        #: full fine-tuning only: a frozen copy of the transformer kept by :meth:`keep_reference_copy`
        self.reference_transformer: Any = None
        if config.gradient_checkpointing:
            self.transformer.enable_gradient_checkpointing()
        self.prompts = PromptEncoder(
            self.pipeline,
            device=self.device,
            max_sequence_length=config.max_sequence_length,
            cache_size=config.prompt_cache_size,
            offload=config.offload_text_encoders,
        )
        self.vae_scale_factor: int = self.pipeline.vae_scale_factor
        self.latent_channels: int = self.transformer.config.in_channels // 4
        self.num_train_timesteps: int = self.pipeline.scheduler.config.num_train_timesteps
        #: transformer forwards so far (tests check distilled guidance costs one per step, classic CFG two)
        self.transformer_calls = 0
        self._warned_double_guidance = False

    # -- protocol: conditioning and velocity -----------------------------------------------------------------

    def encode_prompts(self, prompts: Sequence[str], *, guidance_scale: float) -> Conditioning:
        """T5 embeddings and CLIP pooled embeddings; the negative prompt's too when ``guidance_scale > 1``
        (classic CFG, FluxPipeline's ``true_cfg_scale``)."""
        if not prompts:
            raise RuntimeFailure("encode_prompts got no prompts", hint="pass at least one prompt")
        embeds, pooled = self.prompts.encode(list(prompts))
        tensors = {POSITIVE[0]: embeds, POSITIVE[1]: pooled}
        if guidance_scale > 1:
            negative = self.config.negative_prompt
            neg_embeds, neg_pooled = self.prompts.encode([negative] * len(prompts), keep=[negative])
            tensors[NEGATIVE[0]], tensors[NEGATIVE[1]] = neg_embeds, neg_pooled
        return Conditioning({k: v.to(self.device) for k, v in tensors.items()})

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        """v(x, sigma): one transformer call (with the distilled guidance embedding on dev/Krea) when
        ``guidance_scale <= 1``, else classic CFG ``neg + s (pos - neg)`` over a positive and a negative call.
        Float32, shaped like ``latents``, differentiable w.r.t. the trained weights when called under grad."""
        batch, _, height, width = latents.shape
        tokens = pack(latents.to(self.device, self.dtype))
        sigma = torch.as_tensor(sigmas, dtype=torch.float32, device=self.device).reshape(-1)
        if sigma.numel() == 1:
            sigma = sigma.expand(batch)
        # the pipeline passes the scheduler's timestep (sigma * 1000, float32) cast to the latents' dtype, / 1000
        timestep = (sigma * self.num_train_timesteps).to(self.dtype) / self.num_train_timesteps
        positions = image_ids(height, width, device=self.device, dtype=self.dtype)
        guidance = None
        if self.guidance is not None:
            guidance = torch.full((batch,), self.guidance, device=self.device, dtype=torch.float32)
        positive = self._forward(tokens, timestep, positions, guidance, *self._text(conditioning, POSITIVE, batch))
        if guidance_scale > 1:
            self._warn_double_guidance(guidance_scale)
            negative = self._forward(tokens, timestep, positions, guidance, *self._text(conditioning, NEGATIVE, batch))
            velocity = negative.float() + guidance_scale * (positive.float() - negative.float())
        else:
            velocity = positive.float()
        return unpack(velocity, height, width)

    def _forward(
        self,
        tokens: torch.Tensor,
        timestep: torch.Tensor,
        positions: torch.Tensor,
        guidance: torch.Tensor | None,
        embeds: torch.Tensor,
        pooled: torch.Tensor,
    ) -> torch.Tensor:
        self.transformer_calls += 1
        return self.transformer(
            hidden_states=tokens,
            timestep=timestep,
            guidance=guidance,
            pooled_projections=pooled,
            encoder_hidden_states=embeds,
            txt_ids=text_ids(embeds.shape[1], device=self.device, dtype=self.dtype),
            img_ids=positions,
            return_dict=False,
        )[0]

    def _text(self, conditioning: Conditioning, keys: tuple[str, str], batch: int) -> tuple[torch.Tensor, ...]:
        tensors = conditioning.tensors
        if any(key not in tensors for key in keys):
            raise RuntimeFailure(
                f"FLUX conditioning lacks {keys[0]!r}",
                hint="encode the prompts with the guidance scale used for sampling (the negative prompt is encoded "
                "only when guidance_scale > 1)",
            )
        embeds, pooled = tensors[keys[0]], tensors[keys[1]]
        if embeds.shape[0] != batch:
            raise RuntimeFailure(
                f"conditioning has {embeds.shape[0]} samples but the latents have {batch}",
                hint="index the Conditioning with the same samples as the latents",
            )
        return embeds.to(self.device, self.dtype), pooled.to(self.device, self.dtype)

    def _warn_double_guidance(self, guidance_scale: float) -> None:
        if self.guidance is None or self._warned_double_guidance:
            return
        self._warned_double_guidance = True
        _log.warning(
            "classic CFG (cfg = %s) on top of the distilled guidance embedding (guidance = %s): two transformer "
            "calls per step; guidance-distilled FLUX models are usually run with [rollout] cfg = 1",
            guidance_scale,
            self.guidance,
        )

    # -- protocol: schedule, shapes, images ------------------------------------------------------------------

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> torch.Tensor:
        """The pipeline's sigmas: linspace(1, 1/n, n) through the scheduler with mu = calculate_shift(image tokens)
        (used when the scheduler has ``use_dynamic_shifting``, as dev's; schnell's fixed shift 1 ignores it), then
        0; float32, shape (n + 1,), on the model's device."""
        import numpy as np
        from diffusers.pipelines.flux.pipeline_flux import calculate_shift

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
        if config.get("use_flow_sigmas", False):
            scheduler.set_timesteps(num_steps, device="cpu", mu=mu)
        else:
            scheduler.set_timesteps(sigmas=np.linspace(1.0, 1 / num_steps, num_steps), device="cpu", mu=mu)
        return scheduler.sigmas.to(device=self.device, dtype=torch.float32)

    def latent_shape(self, height: int, width: int) -> tuple[int, int, int]:
        """(16, H / 8, W / 8) for real FLUX; sizes must be whole 2x2 latent patches."""
        multiple = self.vae_scale_factor * 2
        if height <= 0 or width <= 0 or height % multiple or width % multiple:
            raise ConfigError(
                f"image size {height}x{width} is not supported by this FLUX pipeline",
                hint=f"height and width must be positive multiples of {multiple} (VAE factor "
                f"{self.vae_scale_factor} x 2x2 latent packing)",
            )
        return (self.latent_channels, height // self.vae_scale_factor, width // self.vae_scale_factor)

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
            config = vae.config
            z = latents.to(self.device, vae.dtype) / config.scaling_factor + config.shift_factor
            image = vae.decode(z, return_dict=False)[0]
            image = self.pipeline.image_processor.postprocess(image, output_type="pt")
        return (image.permute(0, 2, 3, 1).float() * 255).round().to(torch.uint8)

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, H, W, 3) -> float32 latents (B, C, h, w): the VAE posterior's mean, scaled as FLUX's
        img2img pipeline scales latents, ``(z - shift_factor) * scaling_factor`` (optional protocol member)."""
        if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[-1] != 3:
            raise RuntimeFailure(
                f"encode_images takes uint8 images of shape (B, H, W, 3), got {images.dtype} {tuple(images.shape)}",
                hint="pass images as decode returns them",
            )
        self.latent_shape(int(images.shape[1]), int(images.shape[2]))  # raises for sizes the model cannot take
        with self._vae_on_device() as vae:
            pixels = images.to(self.device).permute(0, 3, 1, 2).float() / 255.0 * 2.0 - 1.0
            posterior = vae.encode(pixels.to(vae.dtype), return_dict=False)[0]
            z = (posterior.mode() - vae.config.shift_factor) * vae.config.scaling_factor
        return z.float()

    # -- protocol: training state ----------------------------------------------------------------------------

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The trained adapter's LoRA weights (float32), or every transformer weight when ``lora_rank = 0``."""
        if self.adapters is None:
            return list(self.transformer.parameters())
        return self.adapters.trained_parameters()

    def fsdp_units(self) -> list[torch.nn.Module]:
        """Optional protocol member: one FSDP2 unit per double-stream block (19 in the real model) and per
        single-stream block (38), the transformer itself (embedders, output projection) the root unit."""
        return [*self.transformer.transformer_blocks, *self.transformer.single_transformer_blocks]

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
        self.reference_transformer = copy.deepcopy(self.transformer).requires_grad_(False).eval()

    def save_lora(self, directory: str | Path) -> None:
        """``pytorch_lora_weights.safetensors`` (diffusers FLUX format); with ``lora_rank = 0`` the whole
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

    def _require_adapters(self, what: str) -> FluxLoraAdapters:
        if self.adapters is None:
            raise RuntimeFailure(
                f"{what} needs LoRA, but this FLUX model fine-tunes the full transformer (lora_rank = 0)",
                hint="set [model] options.lora_rank > 0, or use a loss without a reference/old policy view",
            )
        return self.adapters

    # -- export ------------------------------------------------------------------------------------------------

    def build_pipeline(self) -> Any:
        """A ``FluxPipeline`` sharing this model's modules (the current policy, LoRA on) with its own scheduler
        instance, for export, visual checks and tests."""
        from diffusers import FluxPipeline

        components = dict(self.pipeline.components)
        scheduler = components["scheduler"]
        components["scheduler"] = type(scheduler).from_config(scheduler.config)
        return FluxPipeline(**components)

    def export_pipeline(self, directory: str | Path, *, merged: bool) -> None:
        """Write the current policy for use without omni-rl (``omni-rl export``): the LoRA for
        ``FluxPipeline.load_lora_weights`` or, ``merged``, the whole pipeline with the LoRA fused into a copy of the
        transformer (``DiffusionPipeline.from_pretrained(directory)``, no peft needed)."""
        if not merged:
            if self.adapters is None:
                raise RuntimeFailure(
                    "this FLUX model fine-tunes the full transformer (lora_rank = 0): there is no LoRA to export",
                    hint="export the merged pipeline instead (omni-rl export ... --merged)",
                )
            self.save_lora(directory)
            return
        pipeline = self.build_pipeline()
        pipeline.transformer = self._merged_transformer()
        pipeline.save_pretrained(Path(directory), safe_serialization=True)

    def _merged_transformer(self) -> Any:
        """A copy of the transformer with the trained adapter fused in and every adapter removed."""
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


def build_flux_model(config: FluxConfig, ctx: BuildContext) -> FluxModel:
    """The ``flux`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return FluxModel(config, ctx)
