"""``QwenImageModel``: Qwen-Image as an omni-rl :class:`~omni_rl.protocols.DiffusionModel`.

Every number it produces is computed the way ``QwenImagePipeline.__call__`` computes it: prompts through the
pipeline's own ``encode_prompt`` (chat template, template tokens dropped, per-prompt lengths with a padding mask),
2x2-packed latents with ``img_shapes``, timestep = (sigma x 1000) / 1000, the scheduler's sigmas with the
resolution-dependent shift mu = calculate_shift(image tokens), positive and negative predictions combined by true
CFG with the per-token norm rescaling (both in one transformer call of 2B rows, where the pipeline makes two: the
texts padded to one length under the attention mask; a float rounding away), and the VAE's latent mean/std and
postprocess. So an Euler loop over :meth:`sigma_schedule` with :meth:`predict_velocity` reproduces the pipeline's
output for the same seed. Rollout and training use the same :meth:`predict_velocity`, which is what makes the
on-policy ratio 1.

The CFG arithmetic runs in float32 (MATH.md): under bf16 weights that is a rounding away from the pipeline, which
combines in the weights' dtype. All modules stay in eval mode (Qwen-Image has no dropout; LoRA dropout is 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from omni_rl_sd3.packed_latents import packed_sigma_schedule
from omni_rl_sd3.pipeline_model import DTYPES, PipelineModel, on_device

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_qwen_image.config import QwenImageConfig
from omni_rl_qwen_image.latents import pack, true_cfg, unpack
from omni_rl_qwen_image.loading import load_pipeline, resolve_pipeline_path
from omni_rl_qwen_image.lora import QwenLoraAdapters
from omni_rl_qwen_image.prompts import NEGATIVE, POSITIVE, PromptEncoder, stack_texts, trimmed


class QwenImageModel(PipelineModel):
    """A loaded Qwen-Image pipeline whose transformer is trained (LoRA by default), inside one policy worker.

    Training state, policy views and export are :class:`omni_rl_sd3.pipeline_model.PipelineModel`'s."""

    model_label = "Qwen-Image"
    pipeline_class = "QwenImagePipeline"
    transformer_class = "QwenImageTransformer2DModel"
    adapters_class = QwenLoraAdapters

    def __init__(self, config: QwenImageConfig, ctx: BuildContext | None = None) -> None:
        ctx = ctx or BuildContext()
        self.config = config
        #: the local directory (or hub id) the weights came from
        self.pipeline_path: str = resolve_pipeline_path(config)
        self.device = torch.device(ctx.device)
        self.dtype = DTYPES[config.dtype]
        #: the loaded pipeline; its modules are the ones this model runs and trains
        self.pipeline = load_pipeline(config, self.pipeline_path)
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
        self._prepare_transformer(ctx.seed)
        self.prompts = PromptEncoder(
            self.pipeline,
            device=self.device,
            max_sequence_length=config.max_sequence_length,
            cache_size=config.prompt_cache_size,
            offload=config.offload_text_encoder,
        )
        self.vae_scale_factor: int = self.pipeline.vae_scale_factor
        self.patch_size = 2  # 2x2 packing
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
        """v(x, sigma): the positive prediction alone when ``guidance_scale <= 1``, else true CFG over the positive
        and negative predictions of one call of 2B rows. Float32, shaped like ``latents``, differentiable w.r.t. the
        trained weights when called under grad."""
        batch, _, height, width = latents.shape
        tokens = pack(latents.to(self.device, self.dtype))
        sigma = torch.as_tensor(sigmas, dtype=torch.float32, device=self.device).reshape(-1)
        if sigma.numel() == 1:
            sigma = sigma.expand(batch)
        # the pipeline passes the scheduler's timestep (sigma * 1000, float32) cast to the latents' dtype, / 1000
        timestep = (sigma * self.num_train_timesteps).to(self.dtype) / self.num_train_timesteps
        img_shapes = [[(1, height // 2, width // 2)]] * batch
        positive_text = self._text(conditioning, POSITIVE, batch)
        if guidance_scale <= 1:
            return unpack(self._forward(tokens, timestep, img_shapes, *positive_text).float(), height, width)
        # CFG's two halves in one call of 2B rows, negatives first (QwenImagePipeline makes two calls): the texts
        # are padded to a common length under the attention mask, which the transformer honours, so each half's
        # velocity is the one its own call gives up to the float rounding of a larger batch
        embeds, mask = stack_texts([self._text(conditioning, NEGATIVE, batch), positive_text])
        both = self._forward(torch.cat([tokens, tokens]), torch.cat([timestep, timestep]), img_shapes * 2, embeds, mask)
        negative, positive = both.float().chunk(2)
        return unpack(true_cfg(positive, negative, guidance_scale), height, width)

    def _forward(
        self, tokens: torch.Tensor, timestep: torch.Tensor, img_shapes: list, embeds: torch.Tensor, mask: Any
    ) -> torch.Tensor:
        self.transformer_calls += 1
        with self.attention():
            return self.call_transformer(
                self.transformer,
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
        if num_steps < 1:
            raise ConfigError(f"num_steps must be >= 1, got {num_steps}", hint="set [rollout] steps >= 1")
        _, h, w = self.latent_shape(height, width)
        return packed_sigma_schedule(self.pipeline.scheduler, num_steps, h, w, device=self.device)

    def _patch_note(self) -> str:
        return "2x2 latent packing"

    def _latent_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, 1 / std) shaped (1, C, 1, 1, 1), as the pipeline builds them."""
        config = self.vae.config
        mean = torch.tensor(config.latents_mean).view(1, config.z_dim, 1, 1, 1)
        inverse_std = 1.0 / torch.tensor(config.latents_std).view(1, config.z_dim, 1, 1, 1)
        return mean, inverse_std

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> uint8 (B, H, W, 3), as the pipeline's ``output_type="np"`` times 255, rounded."""
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            z = latents.to(self.device, vae.dtype).unsqueeze(2)
            mean, inverse_std = (t.to(z.device, z.dtype) for t in self._latent_stats())
            image = vae.decode(z / inverse_std + mean, return_dict=False)[0][:, :, 0]
            image = self.pipeline.image_processor.postprocess(image, output_type="pt")
        return (image.permute(0, 2, 3, 1).float() * 255).round().to(torch.uint8)

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, H, W, 3) -> float32 latents (B, C, h, w): the VAE posterior's mean, normalised as the
        Qwen-Image img2img pipelines do, ``(z - mean) / std`` (optional protocol member, offline preference data)."""
        self._check_images(images)
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            pixels = images.to(self.device).permute(0, 3, 1, 2).float() / 255.0 * 2.0 - 1.0
            posterior = vae.encode(pixels.unsqueeze(2).to(vae.dtype), return_dict=False)[0]
            mean, inverse_std = (t.to(pixels.device, vae.dtype) for t in self._latent_stats())
            z = (posterior.mode() - mean) * inverse_std
        return z[:, :, 0].float()

    # -- protocol: training state (the rest is PipelineModel's) ------------------------------------------------

    def fsdp_units(self) -> list[torch.nn.Module]:
        """Optional protocol member: one FSDP2 unit per dual-stream block (60 in the real model), the transformer
        itself (input/output projections, time embedding) the root unit."""
        return list(self.transformer.transformer_blocks)


def build_qwen_image_model(config: QwenImageConfig, ctx: BuildContext) -> QwenImageModel:
    """The ``qwen_image`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return QwenImageModel(config, ctx)
