"""``Flux2KleinModel``: FLUX.2-klein as an omni-rl :class:`~omni_rl.protocols.DiffusionModel`.

Every number it produces is computed the way ``Flux2KleinPipeline.__call__`` computes it: prompts through the
pipeline's own ``encode_prompt`` (Qwen3 chat template, padded to ``max_sequence_length``, hidden states of layers
9/18/27 stacked), the VAE's 2x2-patchified latents normalised by its batch-norm statistics (the space the pipeline
draws its noise in and denoises), 4-axis (T, H, W, L) ids of image (0, row, column, 0) and text (0, 0, 0, index)
tokens, timestep = (sigma x 1000 in the weights' dtype) / 1000, no guidance embedding, classic CFG over a positive
and a negative call on the base variants when the guidance scale is above 1 (never on the step-distilled variants,
``is_distilled``), and the sigmas of linspace(1, 1/n, n) shifted with mu = ``compute_empirical_mu``. So an Euler
loop over :meth:`sigma_schedule` with :meth:`predict_velocity` reproduces the pipeline's output for the same seed.
Rollout and training use the same :meth:`predict_velocity`, which is what makes the on-policy ratio 1.

The CFG arithmetic runs in float32 (docs/math.md#classifier-free-guidance): under bf16 weights that is a rounding
away from the pipeline, which combines in the weights' dtype.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from omni_rl_pipelines.pipeline_model import PipelineModel, on_device

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_flux2.config import Flux2KleinConfig
from omni_rl_flux2.latents import batch_norm_stats, image_ids, sigma_schedule, text_ids, tokens, untokens
from omni_rl_flux2.loading import FLUX2_KLEIN
from omni_rl_flux2.lora import Flux2KleinLoraAdapters
from omni_rl_flux2.prompts import NEGATIVE, POSITIVE, PromptEncoder

_log = logging.getLogger(__name__)


class Flux2KleinModel(PipelineModel):
    """A loaded Flux2KleinPipeline whose transformer is trained (LoRA by default), inside one policy worker."""

    transformer_class = "Flux2Transformer2DModel"
    adapters_class = Flux2KleinLoraAdapters
    pipeline_kind = FLUX2_KLEIN
    #: image sizes are whole 2x2 patches of VAE latents (the pipeline's multiple is vae_scale_factor * 2)
    patch_size = 2

    def __init__(self, config: Flux2KleinConfig, ctx: BuildContext | None = None) -> None:
        ctx = self._open_pipeline(config, ctx)
        #: step-distilled (FLUX.2-klein-4B/9B): the pipeline ignores guidance, so CFG never runs
        self.is_distilled: bool = bool(self.pipeline.config.get("is_distilled", False))
        self._place_components((self.pipeline.text_encoder,))
        self._prepare_transformer(ctx.seed)
        self.prompts = PromptEncoder.for_options(self.pipeline, config, device=self.device)
        self.vae_scale_factor: int = self.pipeline.vae_scale_factor
        #: the channels of the patchified latents the transformer takes (4 x the VAE's latent channels)
        self.latent_channels: int = self.transformer.config.in_channels
        self.num_train_timesteps: int = self.pipeline.scheduler.config.num_train_timesteps
        #: transformer forwards so far (tests check the distilled variants cost one per step, CFG two)
        self.transformer_calls = 0
        self._warned_ignored_cfg = False

    def uses_cfg(self, guidance_scale: float) -> bool:
        """Whether ``guidance_scale`` runs classic CFG: above 1 on a base variant (``do_classifier_free_guidance``)."""
        if guidance_scale > 1 and self.is_distilled and not self._warned_ignored_cfg:
            self._warned_ignored_cfg = True
            _log.warning(
                "cfg = %s is ignored: %s is a step-distilled FLUX.2-klein (is_distilled), which the pipeline runs "
                "without CFG; set [rollout] cfg = 1",
                guidance_scale,
                self.pipeline_path,
            )
        return guidance_scale > 1 and not self.is_distilled

    # -- protocol: conditioning and velocity -----------------------------------------------------------------

    def encode_prompts(self, prompts: Sequence[str], *, guidance_scale: float) -> Conditioning:
        """Qwen3 embeddings; the negative prompt's too when CFG runs (:meth:`uses_cfg`)."""
        if not prompts:
            raise RuntimeFailure("encode_prompts got no prompts", hint="pass at least one prompt")
        tensors = {POSITIVE: self.prompts.encode(list(prompts))}
        if self.uses_cfg(guidance_scale):
            negative = self.config.negative_prompt
            tensors[NEGATIVE] = self.prompts.encode([negative] * len(prompts), keep=[negative])
        return Conditioning({k: v.to(self.device) for k, v in tensors.items()})

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        """v(x, sigma): one transformer call, or classic CFG ``neg + s (pos - neg)`` over a positive and a negative
        prediction (one call of 2B rows) when :meth:`uses_cfg`. Float32, shaped like ``latents``,
        differentiable w.r.t. the trained weights when called under grad."""
        batch, _, height, width = latents.shape
        hidden = tokens(latents.to(self.device, self.dtype))
        positions = image_ids(height, width, device=self.device)
        sigma = self._sigmas(sigmas, batch)
        # the pipeline passes the scheduler's timestep (sigma * 1000, float32) cast to the latents' dtype, / 1000
        timestep = (sigma * self.num_train_timesteps).to(self.dtype) / self.num_train_timesteps
        (positive,) = self._conditioning_rows(conditioning, (POSITIVE,), batch)
        positive = positive.to(self.device, self.dtype)
        if not self.uses_cfg(guidance_scale):
            return untokens(self._forward(hidden, timestep, positions, positive).float(), height, width)
        (negative,) = self._conditioning_rows(conditioning, (NEGATIVE,), batch)
        negative = negative.to(self.device, self.dtype)
        if negative.shape[1] != positive.shape[1]:
            raise RuntimeFailure(
                "the negative and positive prompt embeddings differ in length",
                hint="encode both with the same max_sequence_length",
            )
        # both halves in one call of 2B rows, negatives first (both texts are padded to max_sequence_length; the
        # pipeline makes two calls): the same velocity up to the float rounding of a larger batch
        both = self._forward(
            torch.cat([hidden, hidden]), torch.cat([timestep, timestep]), positions, torch.cat([negative, positive])
        )
        neg, pos = both.float().chunk(2)
        return untokens(neg + guidance_scale * (pos - neg), height, width)

    def _forward(
        self, hidden: torch.Tensor, timestep: torch.Tensor, positions: torch.Tensor, embeds: torch.Tensor
    ) -> torch.Tensor:
        self.transformer_calls += 1
        with self.attention():
            return self.call_transformer(
                self.transformer,
                hidden_states=hidden,
                timestep=timestep,
                guidance=None,
                encoder_hidden_states=embeds,
                txt_ids=text_ids(embeds.shape[1], device=self.device),
                img_ids=positions,
                return_dict=False,
            )[0]

    # -- protocol: schedule, shapes, images ------------------------------------------------------------------

    def latent_shape(self, height: int, width: int) -> tuple[int, int, int]:
        """(4C, H / 2f, W / 2f): the patchified latents (128 x H/16 x W/16 for the real models)."""
        super().latent_shape(height, width)  # raises for sizes that are not whole 2x2 patches of latents
        multiple = self.vae_scale_factor * self.patch_size
        return (self.latent_channels, height // multiple, width // multiple)

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> torch.Tensor:
        """The pipeline's sigmas for ``num_steps`` at this size, then 0; float32, shape (n + 1,)."""
        if num_steps < 1:
            raise ConfigError(f"num_steps must be >= 1, got {num_steps}", hint="set [rollout] steps >= 1")
        _, h, w = self.latent_shape(height, width)
        return sigma_schedule(self.pipeline.scheduler, num_steps, h * w, device=self.device)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> uint8 (B, H, W, 3): batch-norm statistics undone, patches unstacked, the VAE's decode and the
        image processor's postprocess, as the pipeline's ``output_type="np"`` times 255, rounded."""
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            z = latents.to(self.device, vae.dtype)
            mean, std = batch_norm_stats(vae, device=z.device, dtype=z.dtype)
            z = self.pipeline._unpatchify_latents(z * std + mean)
            image = vae.decode(z, return_dict=False)[0]
            image = self.pipeline.image_processor.postprocess(image, output_type="pt")
        return self._uint8_images(image)

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, H, W, 3) -> float32 latents: the VAE posterior's mode, patchified and normalised, as
        the pipeline encodes its reference images (optional protocol member)."""
        pixels = self._pixels(images)
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            z = vae.encode(pixels.to(vae.dtype), return_dict=False)[0].mode()
            z = self.pipeline._patchify_latents(z)
            mean, std = batch_norm_stats(vae, device=z.device, dtype=z.dtype)
            z = (z - mean) / std
        return z.float()

    # -- protocol: training state (the rest is PipelineModel's) ------------------------------------------------

    def fsdp_units(self) -> list[torch.nn.Module]:
        """Optional protocol member: one FSDP2 unit per double-stream and per single-stream block, the transformer
        itself (embedders, modulation, output projection) the root unit."""
        return [*self.transformer.transformer_blocks, *self.transformer.single_transformer_blocks]


def build_flux2_klein_model(config: Flux2KleinConfig, ctx: BuildContext) -> Flux2KleinModel:
    """The ``flux2_klein`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return Flux2KleinModel(config, ctx)
