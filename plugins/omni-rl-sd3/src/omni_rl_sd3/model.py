"""``SD3Model``: Stable Diffusion 3 / 3.5 as an omni-rl :class:`~omni_rl.protocols.DiffusionModel`.

Every number it produces is computed the way ``StableDiffusion3Pipeline.__call__`` computes it (prompt encoding
through the pipeline's own ``encode_prompt``, timestep = sigma x 1000, negative and positive batched in one
forward, the scheduler's shifted sigmas, the VAE scaling/shift and the image processor's postprocess), so an
Euler loop over :meth:`sigma_schedule` with :meth:`predict_velocity` reproduces the pipeline's output for the
same seed. Rollout and training use the same :meth:`predict_velocity`, which is what makes the on-policy ratio 1.

All modules stay in eval mode: SD3 has no dropout, and a LoRA dropout would make the recomputed log-probs differ
from the rollout's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from omni_rl_pipelines.lora import LoraAdapters
from omni_rl_pipelines.pipeline_model import FULL_TRANSFORMER_DIR, PipelineModel

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_sd3.config import SD3Config
from omni_rl_sd3.loading import SD3, load_pipeline, resolve_pipeline_path

__all__ = ["FULL_TRANSFORMER_DIR", "SD3LoraAdapters", "SD3Model", "build_sd3_model"]


class SD3LoraAdapters(LoraAdapters):
    """Named LoRA adapters on an ``SD3Transformer2DModel``, in diffusers' SD3 LoRA file format."""

    pipeline_class = "StableDiffusion3Pipeline"
    model_label = "SD3"
    target_hint = (
        "lora_target_modules are dotted-name suffixes of transformer modules, e.g. 'attn.to_q', "
        "'attn.add_q_proj', 'ff.net.2', 'norm1.linear'"
    )


class SD3Model(PipelineModel):
    """A loaded SD3 pipeline whose transformer is trained (LoRA by default), inside one policy worker.

    Training state, policy views and export are :class:`omni_rl_pipelines.pipeline_model.PipelineModel`'s."""

    transformer_class = "SD3Transformer2DModel"
    adapters_class = SD3LoraAdapters
    pipeline_kind = SD3

    def __init__(self, config: SD3Config, ctx: BuildContext | None = None) -> None:
        ctx = self._open_pipeline(config, ctx)
        self.pipeline.to(self.device)
        for name in ("vae", "text_encoder", "text_encoder_2", "text_encoder_3"):
            module = getattr(self.pipeline, name, None)
            if module is not None:
                module.requires_grad_(False).eval()
        self._prepare_transformer(ctx.seed)
        self.vae = self.pipeline.vae
        self.vae_scale_factor: int = self.pipeline.vae_scale_factor
        self.patch_size: int = self.transformer.config.patch_size
        self.latent_channels: int = self.transformer.config.in_channels
        self.num_train_timesteps: int = self.pipeline.scheduler.config.num_train_timesteps

    def _resolve_path(self, config: SD3Config) -> str:
        return resolve_pipeline_path(config)  # the tiny pipeline follows use_t5

    def _load_pipeline(self, config: SD3Config, source: str) -> Any:
        return load_pipeline(config, source)  # T5 is not read when use_t5 is false

    # -- protocol: conditioning and velocity -----------------------------------------------------------------

    @torch.no_grad()
    def encode_prompts(self, prompts: Sequence[str], *, guidance_scale: float) -> Conditioning:
        """CLIP-L + CLIP-G + T5 embeddings through the pipeline's own ``encode_prompt``; the empty negative
        prompt's too when ``guidance_scale > 1`` (SD3's CFG convention)."""
        if not prompts:
            raise RuntimeFailure("encode_prompts got no prompts", hint="pass at least one prompt")
        cfg = guidance_scale > 1
        positive, negative, pooled, negative_pooled = self.pipeline.encode_prompt(
            prompt=list(prompts),
            prompt_2=None,
            prompt_3=None,
            device=self.device,
            num_images_per_prompt=1,
            do_classifier_free_guidance=cfg,
            max_sequence_length=self.config.max_sequence_length,
        )
        tensors = {"prompt_embeds": positive, "pooled_prompt_embeds": pooled}
        if cfg:
            tensors["negative_prompt_embeds"] = negative
            tensors["negative_pooled_prompt_embeds"] = negative_pooled
        return Conditioning(tensors)

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        """v(x, sigma) = v_neg + w (v_pos - v_neg) when w > 1, else v_pos; float32, differentiable w.r.t. the
        trained weights when called under grad. Negative and positive go through one forward of batch 2B in that
        order, exactly as the pipeline batches them, so rollouts match the pipeline bit for bit in float32
        (docs/math.md#classifier-free-guidance)."""
        batch = latents.shape[0]
        x = latents.to(self.device, self.dtype)
        timestep = self._sigmas(sigmas, batch) * self.num_train_timesteps
        embeds, pooled = self._conditioning(conditioning, "prompt_embeds", "pooled_prompt_embeds", batch)
        if guidance_scale > 1:
            negative, negative_pooled = self._conditioning(
                conditioning, "negative_prompt_embeds", "negative_pooled_prompt_embeds", batch
            )
            both = self._forward(
                torch.cat([x, x]),
                torch.cat([timestep, timestep]),
                torch.cat([negative, embeds]),
                torch.cat([negative_pooled, pooled]),
            )
            uncond, text = both.chunk(2)
            velocity = uncond + guidance_scale * (text - uncond)
        else:
            velocity = self._forward(x, timestep, embeds, pooled)
        return velocity.float()

    def _forward(
        self, x: torch.Tensor, timestep: torch.Tensor, embeds: torch.Tensor, pooled: torch.Tensor
    ) -> torch.Tensor:
        with self.attention():
            return self.call_transformer(
                self.transformer,
                hidden_states=x,
                timestep=timestep,
                encoder_hidden_states=embeds,
                pooled_projections=pooled,
                return_dict=False,
            )[0]

    def _conditioning(
        self, conditioning: Conditioning, key: str, pooled_key: str, batch: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        embeds, pooled = self._conditioning_rows(conditioning, (key, pooled_key), batch)
        return embeds.to(self.device, self.dtype), pooled.to(self.device, self.dtype)

    # -- protocol: schedule, shapes, images ------------------------------------------------------------------

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> torch.Tensor:
        """The pipeline scheduler's sigmas for ``num_steps`` (shift applied, resolution-dependent shift when the
        scheduler is configured for it, trailing 0): float32, shape (num_steps + 1,), on the model's device."""
        from diffusers.pipelines.stable_diffusion_3.pipeline_stable_diffusion_3 import calculate_shift

        if num_steps < 1:
            raise ConfigError(f"num_steps must be >= 1, got {num_steps}", hint="set [rollout] steps >= 1")
        source = self.pipeline.scheduler
        scheduler = type(source).from_config(source.config)  # a private copy: set_timesteps mutates state
        kwargs: dict[str, Any] = {}
        if scheduler.config.get("use_dynamic_shifting", None):
            _, h, w = self.latent_shape(height, width)
            config = scheduler.config
            kwargs["mu"] = calculate_shift(
                (h // self.patch_size) * (w // self.patch_size),
                config.get("base_image_seq_len", 256),
                config.get("max_image_seq_len", 4096),
                config.get("base_shift", 0.5),
                config.get("max_shift", 1.16),
            )
        scheduler.set_timesteps(num_steps, device="cpu", **kwargs)
        return scheduler.sigmas.to(device=self.device, dtype=torch.float32)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> uint8 (B, H, W, 3), as the pipeline's ``output_type="np"`` times 255, rounded."""
        config = self.vae.config
        z = latents.to(self.device, self.vae.dtype)
        z = z / config.scaling_factor + (config.shift_factor or 0.0)
        image = self.vae.decode(z, return_dict=False)[0]
        image = self.pipeline.image_processor.postprocess(image, output_type="pt")
        return self._uint8_images(image)

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, H, W, 3) -> float32 latents (B, C, h, w), the inverse of :meth:`decode`'s scaling.

        Optional protocol member (offline preference data): pixels go to [-1, 1] as the image processor's
        ``normalize`` does, through the VAE encoder, and the posterior's mean is scaled as the pipeline scales
        latents, ``(z - shift_factor) * scaling_factor``. The mean rather than a posterior sample makes the
        latents a deterministic function of the image, so they can be encoded once and cached.
        """
        pixels = self._pixels(images)
        config = self.vae.config
        posterior = self.vae.encode(pixels.to(self.vae.dtype), return_dict=False)[0]
        z = (posterior.mode() - (config.shift_factor or 0.0)) * config.scaling_factor
        return z.float()


def build_sd3_model(config: SD3Config, ctx: BuildContext) -> SD3Model:
    """The ``sd3`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return SD3Model(config, ctx)
