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

The CFG arithmetic runs in float32 (docs/math.md#classifier-free-guidance): under bf16 weights that is a rounding
away from the pipeline, which combines in the weights' dtype. All modules stay in eval mode (Qwen-Image has no
dropout; LoRA dropout is 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from omni_rl_pipelines.packed_latents import PackedPipelineModel
from omni_rl_pipelines.pipeline_model import on_device

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_qwen_image.config import QwenImageConfig
from omni_rl_qwen_image.latents import pack, true_cfg, unpack
from omni_rl_qwen_image.loading import QWEN_IMAGE
from omni_rl_qwen_image.lora import QwenLoraAdapters
from omni_rl_qwen_image.prompts import NEGATIVE, POSITIVE, PromptEncoder, stack_texts, trimmed


class QwenImageModel(PackedPipelineModel):
    """A loaded Qwen-Image pipeline whose transformer is trained (LoRA by default), inside one policy worker.

    Training state, policy views, export and the packed sigma schedule are
    :class:`omni_rl_pipelines.packed_latents.PackedPipelineModel`'s."""

    transformer_class = "QwenImageTransformer2DModel"
    adapters_class = QwenLoraAdapters
    pipeline_kind = QWEN_IMAGE

    def __init__(self, config: QwenImageConfig, ctx: BuildContext | None = None) -> None:
        ctx = self._open_pipeline(config, ctx)
        if self.transformer.config.guidance_embeds:
            raise ConfigError(
                f"{self.pipeline_path} holds a guidance-distilled Qwen-Image transformer (guidance_embeds = true)",
                hint="the qwen_image model trains the true-CFG Qwen-Image; use a pipeline without guidance embeddings",
            )
        self._place_components((self.pipeline.text_encoder,))
        self._prepare_transformer(ctx.seed)
        self.prompts = self._prompt_encoder(config)
        self.vae_scale_factor: int = self.pipeline.vae_scale_factor
        self.latent_channels: int = self.transformer.config.in_channels // 4
        self.num_train_timesteps: int = self.pipeline.scheduler.config.num_train_timesteps
        #: transformer forwards so far (one per prompt set per step; tests check CFG costs two, no CFG one)
        self.transformer_calls = 0

    def _prompt_encoder(self, config: Any) -> Any:
        """The prompt encoder (the edit models' encodes each prompt with its condition images)."""
        return PromptEncoder.for_options(self.pipeline, config, device=self.device)

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
        sigma = self._sigmas(sigmas, batch)
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
        embeds, mask = self._conditioning_rows(conditioning, (key, f"{key}_mask"), batch)
        return trimmed(embeds.to(self.device, self.dtype), mask.to(self.device))

    # -- protocol: schedule, shapes, images ------------------------------------------------------------------

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> uint8 (B, H, W, 3), as the pipeline's ``output_type="np"`` times 255, rounded."""
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            z = latents.to(self.device, vae.dtype).unsqueeze(2)
            mean, inverse_std = (t.to(z.device, z.dtype) for t in self._latent_stats())
            image = vae.decode(z / inverse_std + mean, return_dict=False)[0][:, :, 0]
            image = self.pipeline.image_processor.postprocess(image, output_type="pt")
        return self._uint8_images(image)

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, H, W, 3) -> float32 latents (B, C, h, w): the VAE posterior's mean, normalised as the
        Qwen-Image img2img pipelines do, ``(z - mean) / std`` (optional protocol member, offline preference data)."""
        pixels = self._pixels(images)
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
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
