"""``ZImageModel``: Z-Image (and Z-Image-Turbo) as an omni-rl :class:`~omni_rl.protocols.DiffusionModel`.

Every number is computed the way ``ZImagePipeline.__call__`` computes it: prompts through the pipeline's own
``encode_prompt`` (Qwen3 chat template, second-to-last hidden layer, padding dropped); latents (B, 16, H/8, W/8)
handed to the single-stream transformer as a list of (C, 1, h, w) tensors with a list of per-prompt caption
tensors of their own lengths; timestep (1000 - sigma x 1000) / 1000; the transformer's output negated (it predicts
data - noise, omni-rl's velocity is noise - data); CFG v_pos + w (v_pos - v_neg) per sample in float32 for
w > 0, with the pipeline's optional norm cap (``cfg_normalization``) and truncation (``cfg_truncation``); the
pipeline's sigma schedule (:mod:`omni_rl_z_image.schedule`); and the VAE's ``scaling_factor``/``shift_factor``. So an
Euler loop over :meth:`sigma_schedule` with :meth:`predict_velocity` reproduces the pipeline's output for the same
seed, and rollout and training share :meth:`predict_velocity`, which makes the first on-policy ratio 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from omni_rl_pipelines.pipeline_model import PipelineModel, on_device

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_z_image.config import ZImageConfig
from omni_rl_z_image.loading import Z_IMAGE
from omni_rl_z_image.lora import ZImageLoraAdapters
from omni_rl_z_image.prompts import NEGATIVE, POSITIVE, ZImagePrompts, unpadded
from omni_rl_z_image.schedule import model_time, z_image_sigmas


class ZImageModel(PipelineModel):
    """A loaded Z-Image pipeline whose transformer is trained (LoRA by default), inside one policy worker."""

    transformer_class = "ZImageTransformer2DModel"
    adapters_class = ZImageLoraAdapters
    pipeline_kind = Z_IMAGE
    #: the transformer patchifies 2x2 latent patches itself (``all_patch_size = (2,)``)
    patch_size = 2

    def __init__(self, config: ZImageConfig, ctx: BuildContext | None = None) -> None:
        ctx = self._open_pipeline(config, ctx)
        if 2 not in tuple(self.transformer.config.all_patch_size):
            raise ConfigError(
                f"{self.pipeline_path} holds a Z-Image transformer without 2x2 patches "
                f"(all_patch_size = {self.transformer.config.all_patch_size})",
                hint="ZImagePipeline runs the transformer with patch_size 2; use a standard Z-Image checkpoint",
            )
        self._place_components((self.pipeline.text_encoder,))
        self._prepare_transformer(ctx.seed)
        self.prompts = ZImagePrompts.for_options(self.pipeline, config, device=self.device)
        self.vae_scale_factor: int = self.pipeline.vae_scale_factor
        self.latent_channels: int = self.transformer.config.in_channels
        self.num_train_timesteps: int = self.pipeline.scheduler.config.num_train_timesteps
        #: transformer forwards so far (tests check CFG costs one call of 2B rows)
        self.transformer_calls = 0

    # -- protocol: conditioning and velocity -----------------------------------------------------------------

    def encode_prompts(self, prompts: Sequence[str], *, guidance_scale: float) -> Conditioning:
        """Qwen3 embeddings with a padding mask; the negative prompt's too when ``guidance_scale > 0`` (the
        pipeline's CFG condition)."""
        if not prompts:
            raise RuntimeFailure("encode_prompts got no prompts", hint="pass at least one prompt")
        embeds, mask = self.prompts.encode(list(prompts))
        tensors = {POSITIVE: embeds, f"{POSITIVE}_mask": mask}
        if guidance_scale > 0:
            negative = self.config.negative_prompt
            neg_embeds, neg_mask = self.prompts.encode([negative] * len(prompts), keep=[negative])
            tensors[NEGATIVE], tensors[f"{NEGATIVE}_mask"] = neg_embeds, neg_mask
        return Conditioning({k: v.to(self.device) for k, v in tensors.items()})

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        """v(x, sigma) = -transformer output: the positive prediction alone when ``guidance_scale <= 0`` or CFG is
        truncated for every sample, else CFG over one call of 2B rows (positives first, as the pipeline batches
        them). Float32, shaped like ``latents``, differentiable w.r.t. the trained weights under grad."""
        batch = latents.shape[0]
        sigma = self._sigmas(sigmas, batch)
        t = model_time(sigma, self.num_train_timesteps)
        positive = self._captions(conditioning, POSITIVE, batch)
        guided = torch.zeros(batch, dtype=torch.bool, device=self.device)
        if guidance_scale > 0:
            guided = t <= self.config.cfg_truncation
        if not bool(guided.any()):
            return -self._forward(latents, t, positive)
        negative = self._captions(conditioning, NEGATIVE, batch)
        both = self._forward(torch.cat([latents, latents]), torch.cat([t, t]), positive + negative)
        pos, neg = both[:batch], both[batch:]
        combined = pos + guidance_scale * (pos - neg)
        if self.config.cfg_normalization > 0:
            pos_norm = torch.linalg.vector_norm(pos.flatten(1), dim=1)
            new_norm = torch.linalg.vector_norm(combined.flatten(1), dim=1)
            cap = pos_norm * self.config.cfg_normalization
            scale = torch.where(new_norm > cap, cap / new_norm, torch.ones_like(new_norm))
            combined = combined * scale.view(-1, 1, 1, 1)
        return -torch.where(guided.view(-1, 1, 1, 1), combined, pos)

    def _forward(self, latents: torch.Tensor, t: torch.Tensor, captions: list[torch.Tensor]) -> torch.Tensor:
        """The transformer on per-sample lists, as the pipeline calls it: (B, C, h, w) float32 out."""
        self.transformer_calls += 1
        x = list(latents.to(self.device, self.dtype).unsqueeze(2).unbind(dim=0))
        with self.attention():
            out = self.call_transformer(self.transformer, x=x, t=t, cap_feats=captions, return_dict=False)[0]
        return torch.stack([o.float() for o in out], dim=0).squeeze(2)

    def _captions(self, conditioning: Conditioning, key: str, batch: int) -> list[torch.Tensor]:
        embeds, mask = self._conditioning_rows(conditioning, (key, f"{key}_mask"), batch)
        return unpadded(embeds.to(self.device, self.dtype), mask.to(self.device))

    # -- protocol: schedule, images ----------------------------------------------------------------------------

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> torch.Tensor:
        """The pipeline's n + 1 sigmas for this size (the checkpoint's shift; mu by image tokens when the scheduler
        shifts dynamically), float32 on the model's device."""
        if num_steps < 1:
            raise ConfigError(f"num_steps must be >= 1, got {num_steps}", hint="set [rollout] steps >= 1")
        _, h, w = self.latent_shape(height, width)
        return z_image_sigmas(self.pipeline.scheduler, num_steps, h, w).to(self.device)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> uint8 (B, H, W, 3), as the pipeline's ``output_type="np"`` times 255, rounded."""
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            z = latents.to(self.device, vae.dtype) / vae.config.scaling_factor + vae.config.shift_factor
            image = vae.decode(z, return_dict=False)[0]
            image = self.pipeline.image_processor.postprocess(image, output_type="pt")
        return self._uint8_images(image)

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, H, W, 3) -> float32 latents: the VAE posterior's mean, ``(z - shift) * scaling`` (the
        inverse of :meth:`decode`'s normalisation; optional protocol member, offline preference data)."""
        pixels = self._pixels(images)
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            z = vae.encode(pixels.to(vae.dtype), return_dict=False)[0].mode()
        return ((z.float() - vae.config.shift_factor) * vae.config.scaling_factor).float()

    # -- protocol: training state (the rest is PipelineModel's) ------------------------------------------------

    def fsdp_units(self) -> list[torch.nn.Module]:
        """Optional protocol member: one FSDP2 unit per transformer block (the 30 main layers and the noise and
        context refiners), the transformer itself (embedders, final layer) the root unit."""
        t = self.transformer
        return [*t.noise_refiner, *t.context_refiner, *t.layers]


def build_z_image_model(config: ZImageConfig, ctx: BuildContext) -> ZImageModel:
    """The ``z_image`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return ZImageModel(config, ctx)
