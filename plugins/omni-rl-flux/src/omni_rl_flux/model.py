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

The CFG arithmetic runs in float32 (docs/math.md#classifier-free-guidance): under bf16 weights that is a rounding
away from the pipeline, which combines in the weights' dtype. All modules stay in eval mode (FLUX has no dropout;
LoRA dropout is 0).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from omni_rl_pipelines.packed_latents import PackedPipelineModel
from omni_rl_pipelines.pipeline_model import on_device

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import RuntimeFailure
from omni_rl_flux.config import FluxConfig
from omni_rl_flux.guidance import distilled_guidance
from omni_rl_flux.latents import image_ids, pack, text_ids, unpack
from omni_rl_flux.loading import FLUX
from omni_rl_flux.lora import FluxLoraAdapters
from omni_rl_flux.prompts import NEGATIVE, POSITIVE, PromptEncoder

_log = logging.getLogger(__name__)


class FluxModel(PackedPipelineModel):
    """A loaded FLUX pipeline whose transformer is trained (LoRA by default), inside one policy worker.

    Training state, policy views, export and the packed sigma schedule are
    :class:`omni_rl_pipelines.packed_latents.PackedPipelineModel`'s."""

    transformer_class = "FluxTransformer2DModel"
    adapters_class = FluxLoraAdapters
    pipeline_kind = FLUX

    def __init__(self, config: FluxConfig, ctx: BuildContext | None = None) -> None:
        ctx = self._open_pipeline(config, ctx)
        #: the embedded (distilled) guidance value of every transformer call; None without guidance embeddings
        self.guidance: float | None = distilled_guidance(
            config.guidance, guidance_embeds=bool(self.transformer.config.guidance_embeds), path=self.pipeline_path
        )
        self._place_components((self.pipeline.text_encoder, self.pipeline.text_encoder_2))
        self._prepare_transformer(ctx.seed)
        self.prompts = PromptEncoder.for_options(self.pipeline, config, device=self.device)
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
        ``guidance_scale <= 1``, else classic CFG ``neg + s (pos - neg)`` over a positive and a negative
        prediction (one call of 2B rows).
        Float32, shaped like ``latents``, differentiable w.r.t. the trained weights when called under grad."""
        batch, _, height, width = latents.shape
        # the transformer's image tokens: the packed target, then whatever a subclass appends (Kontext's condition);
        # its output is cropped back to the target's tokens
        tokens, positions = self._transformer_input(latents, conditioning)
        target = (height // 2) * (width // 2)
        sigma = self._sigmas(sigmas, batch)
        # the pipeline passes the scheduler's timestep (sigma * 1000, float32) cast to the latents' dtype, / 1000
        timestep = (sigma * self.num_train_timesteps).to(self.dtype) / self.num_train_timesteps
        guidance = None
        if self.guidance is not None:
            guidance = torch.full((batch,), self.guidance, device=self.device, dtype=torch.float32)
        positive_text = self._text(conditioning, POSITIVE, batch)
        if guidance_scale <= 1:
            velocity = self._forward(tokens, timestep, positions, guidance, *positive_text)[:, :target]
            return unpack(velocity.float(), height, width)
        self._warn_double_guidance(guidance_scale)
        negative_text = self._text(conditioning, NEGATIVE, batch)
        # CFG's two halves in one call of 2B rows, negatives first (both T5 texts are padded to max_sequence_length;
        # the pipeline makes two calls): the same velocity up to the float rounding of a larger batch, with one
        # launch of twice the rows
        doubled = None if guidance is None else torch.cat([guidance, guidance])
        texts = [torch.cat([n, p]) for n, p in zip(negative_text, positive_text, strict=True)]
        both = self._forward(torch.cat([tokens, tokens]), torch.cat([timestep, timestep]), positions, doubled, *texts)
        negative, positive = both[:, :target].float().chunk(2)
        return unpack(negative + guidance_scale * (positive - negative), height, width)

    def _transformer_input(
        self, latents: torch.Tensor, conditioning: Conditioning
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(image tokens (B, N, 4C), their position ids (N, 3)) of one transformer call: FLUX's are the packed target
        latents with ``_prepare_latent_image_ids``' ids; FLUX.1-Kontext appends its condition's after them."""
        _, _, height, width = latents.shape
        positions = image_ids(height, width, device=self.device, dtype=self.dtype)
        return pack(latents.to(self.device, self.dtype)), positions

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
        with self.attention():
            return self.call_transformer(
                self.transformer,
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
        embeds, pooled = self._conditioning_rows(conditioning, keys, batch)
        return embeds.to(self.device, self.dtype), pooled.to(self.device, self.dtype)

    def _warn_double_guidance(self, guidance_scale: float) -> None:
        if self.guidance is None or self._warned_double_guidance:
            return
        self._warned_double_guidance = True
        _log.warning(
            "classic CFG (cfg = %s) on top of the distilled guidance embedding (guidance = %s): twice the "
            "transformer rows per step; guidance-distilled FLUX models are usually run with [rollout] cfg = 1",
            guidance_scale,
            self.guidance,
        )

    # -- protocol: schedule, shapes, images ------------------------------------------------------------------

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> uint8 (B, H, W, 3), as the pipeline's ``output_type="np"`` times 255, rounded."""
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            config = vae.config
            z = latents.to(self.device, vae.dtype) / config.scaling_factor + config.shift_factor
            image = vae.decode(z, return_dict=False)[0]
            image = self.pipeline.image_processor.postprocess(image, output_type="pt")
        return self._uint8_images(image)

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, H, W, 3) -> float32 latents (B, C, h, w): the VAE posterior's mean, scaled as FLUX's
        img2img pipeline scales latents, ``(z - shift_factor) * scaling_factor`` (optional protocol member)."""
        pixels = self._pixels(images)
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            posterior = vae.encode(pixels.to(vae.dtype), return_dict=False)[0]
            z = (posterior.mode() - vae.config.shift_factor) * vae.config.scaling_factor
        return z.float()

    # -- protocol: training state (the rest is PipelineModel's) ------------------------------------------------

    def fsdp_units(self) -> list[torch.nn.Module]:
        """Optional protocol member: one FSDP2 unit per double-stream block (19 in the real model) and per
        single-stream block (38), the transformer itself (embedders, output projection) the root unit."""
        return [*self.transformer.transformer_blocks, *self.transformer.single_transformer_blocks]


def build_flux_model(config: FluxConfig, ctx: BuildContext) -> FluxModel:
    """The ``flux`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return FluxModel(config, ctx)
