"""``WanModel``: Wan2.1 / Wan2.2 text-to-video as an omni-rl :class:`~omni_rl.protocols.DiffusionModel`.

Every number it produces is computed the way ``WanPipeline.__call__`` computes it: prompts through the pipeline's
own ``encode_prompt`` (UMT5, zero-padded to ``max_sequence_length``), latents (B, C, F', h, w) with F' = (F - 1) / 4
+ 1, timestep = sigma x 1000 (per token for Wan2.2 TI2V's ``expand_timesteps``), the scheduler's shifted sigmas,
the expert chosen per step by ``t >= boundary_ratio x 1000`` (Wan2.2 A14B) with ``guidance_scale_2`` for the
low-noise expert, true CFG ``uncond + g (cond - uncond)`` (both halves in one transformer call of 2B rows), and
the VAE's latent mean/std and video postprocessing. So an Euler loop over :meth:`sigma_schedule` with
:meth:`predict_velocity` reproduces the pipeline's frames for the same seed (with its FlowMatchEuler scheduler).
Rollout and training use the same :meth:`predict_velocity`, which is what makes the on-policy ratio 1.

Video: ``modality = "video"``; :meth:`latent_shape` takes ``num_frames`` and :meth:`decode` returns uint8 frames
(B, F, H, W, 3) (docs/hooks.md, "Video").
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import torch
from omni_rl_pipelines.lora import merged_copy
from omni_rl_pipelines.pipeline_model import PipelineModel, on_device

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_wan.config import WanConfig
from omni_rl_wan.experts import HIGH_NOISE, LOW_NOISE, WanExperts, route
from omni_rl_wan.loading import WAN
from omni_rl_wan.lora import ExpertLoraAdapters, WanLoraAdapters
from omni_rl_wan.prompts import NEGATIVE, POSITIVE, PromptEncoder
from omni_rl_wan.schedule import wan_sigmas

#: which pipeline components train for each ``train_experts`` value
_TRAINED = {"both": (HIGH_NOISE, LOW_NOISE), "high_noise": (HIGH_NOISE,), "low_noise": (LOW_NOISE,)}


class WanModel(PipelineModel):
    """A loaded Wan pipeline whose transformer(s) train (LoRA by default), inside one policy worker.

    ``transformer`` is the pipeline's transformer, or for a two-expert pipeline a :class:`WanExperts` holding both
    (what the core checkpoints and ships). Training state, policy views and export are
    :class:`omni_rl_pipelines.pipeline_model.PipelineModel`'s, extended to several experts."""

    transformer_class = "WanTransformer3DModel"
    adapters_class = WanLoraAdapters
    pipeline_kind = WAN
    #: the rollout asks for ``num_frames`` and gets (B, F, H, W, 3) frames from :meth:`decode`
    modality: ClassVar[str] = "video"
    #: how prompts become UMT5 embeddings (the image-to-video model's avoids a code path that needs ftfy)
    prompt_encoder_class: ClassVar[type[PromptEncoder]] = PromptEncoder

    def __init__(self, config: WanConfig, ctx: BuildContext | None = None) -> None:
        ctx = self._open_pipeline(config, ctx)
        scheduler = self.pipeline.scheduler
        self.num_train_timesteps: int = scheduler.config.num_train_timesteps
        ratio = self.pipeline.config.get("boundary_ratio")
        two = ratio is not None and self.pipeline.transformer_2 is not None
        #: t >= this goes to the high-noise expert; None: one expert for every step (Wan2.1, TI2V-5B)
        self.boundary_timestep: float | None = float(ratio) * self.num_train_timesteps if two else None
        #: the experts by pipeline component ("transformer", "transformer_2"), in routing order
        self.experts: dict[str, Any] = {HIGH_NOISE: self.pipeline.transformer}
        if two:
            self.experts[LOW_NOISE] = self.pipeline.transformer_2
        self._check_options(two)
        if two:
            self.transformer = WanExperts(*self.experts.values())
        self._place_components((self.pipeline.text_encoder,))
        if two:
            self._prepare_experts(ctx.seed)
        else:
            self._prepare_transformer(ctx.seed)
        self.prompts = self.prompt_encoder_class.for_options(self.pipeline, config, device=self.device)
        first = self.experts[HIGH_NOISE].config
        self.vae_scale_factor: int = self.pipeline.vae_scale_factor_spatial
        self.vae_scale_factor_temporal: int = self.pipeline.vae_scale_factor_temporal
        self.patch_size: int = int(first.patch_size[1])
        self.temporal_patch_size: int = int(first.patch_size[0])
        self.latent_channels: int = int(first.in_channels)
        #: Wan2.2 TI2V-5B: one timestep per latent token instead of one per sample
        self.expand_timesteps: bool = bool(self.pipeline.config.get("expand_timesteps", False))
        #: transformer forwards so far (tests check CFG costs two, no CFG one, and which expert ran)
        self.transformer_calls: dict[str, int] = dict.fromkeys(self.experts, 0)

    def _check_options(self, two: bool) -> None:
        config = self.config
        if not two and config.guidance_scale_2 is not None:
            raise ConfigError(
                f"{self.pipeline_path} has one transformer, so guidance_scale_2 has no expert to apply to",
                hint="guidance_scale_2 is for Wan2.2 two-expert pipelines (transformer_2 and boundary_ratio); "
                "remove it",
            )
        if not two and config.train_experts == "low_noise":
            raise ConfigError(
                f"{self.pipeline_path} has one transformer, so there is no low-noise expert to train",
                hint='leave train_experts at "both" for single-transformer Wan pipelines',
            )
        if two and config.lora_rank == 0:
            raise ConfigError(
                "full fine-tuning (lora_rank = 0) of a two-expert Wan2.2 pipeline is not supported",
                hint="train LoRA on the experts (lora_rank > 0), choosing them with train_experts",
            )

    def _prepare_experts(self, seed: int) -> None:
        """LoRA on each trained expert (seeded apart, so the experts' A matrices differ), the rest frozen."""
        self.transformer.requires_grad_(False).eval()
        trained = _TRAINED[self.config.train_experts]
        self.adapters = ExpertLoraAdapters(
            {
                component: WanLoraAdapters(self.experts[component], self.config, seed=seed + 1000 * k)
                for k, component in enumerate(trained)
            }
        )
        self.reference_transformer = None
        for expert in self.experts.values():
            self._apply_module_options(expert)

    @property
    def trained_experts(self) -> tuple[str, ...]:
        """The pipeline components whose weights train."""
        return _TRAINED[self.config.train_experts] if len(self.experts) > 1 else (HIGH_NOISE,)

    # -- protocol: conditioning and velocity -----------------------------------------------------------------

    def encode_prompts(self, prompts: Sequence[str], *, guidance_scale: float) -> Conditioning:
        """UMT5 embeddings (B, max_sequence_length, D); the negative prompt's too when ``guidance_scale > 1`` (the
        pipeline's CFG switch, for both experts)."""
        if not prompts:
            raise RuntimeFailure("encode_prompts got no prompts", hint="pass at least one prompt")
        tensors = {POSITIVE: self.prompts.encode(list(prompts))}
        if guidance_scale > 1:
            negative = self.config.negative_prompt
            tensors[NEGATIVE] = self.prompts.encode([negative] * len(prompts), keep=[negative])
        return Conditioning({k: v.to(self.device) for k, v in tensors.items()})

    def predict_velocity(
        self, latents: torch.Tensor, sigmas: torch.Tensor, conditioning: Conditioning, guidance_scale: float
    ) -> torch.Tensor:
        """v(x, sigma) for latents (B, C, F', h, w): each sample through the expert of its timestep, positive alone
        when ``guidance_scale <= 1``, else true CFG with that expert's scale (docs/math.md#classifier-free-guidance).
        Float32, shaped like ``latents``."""
        batch = latents.shape[0]
        timestep = self._sigmas(sigmas, batch) * self.num_train_timesteps  # the scheduler's: float32 sigma x 1000
        x = latents.to(self.device, self.dtype)
        velocity = torch.empty(latents.shape, dtype=torch.float32, device=self.device)
        for component, idx in route(timestep, self.boundary_timestep).items():
            scale = guidance_scale
            if component == LOW_NOISE and self.config.guidance_scale_2 is not None:
                scale = self.config.guidance_scale_2
            part = self._guided(
                component, _take(x, idx), _take(timestep, idx), conditioning, idx, guidance_scale, scale
            )
            if idx is None:
                velocity = part
            else:
                velocity[idx] = part
        return velocity

    def _guided(
        self,
        component: str,
        x: torch.Tensor,
        timestep: torch.Tensor,
        conditioning: Conditioning,
        idx: torch.Tensor | None,
        guidance_scale: float,
        scale: float,
    ) -> torch.Tensor:
        positive_text = self._text(conditioning, POSITIVE, idx, len(x))
        x, timestep, extra = self._transformer_inputs(x, timestep, conditioning, idx)
        if guidance_scale <= 1:  # WanPipeline's do_classifier_free_guidance reads guidance_scale alone
            return self._forward(component, x, timestep, positive_text, **extra).float()
        negative_text = self._text(conditioning, NEGATIVE, idx, len(x))
        # CFG's two halves in one call of 2B rows, negatives first (both texts are padded to max_sequence_length):
        # one launch of twice the rows fills a GPU better than WanPipeline's two calls, and gives the same velocity
        # up to the float rounding of a larger batch; both halves get the same image condition
        both = self._forward(
            component,
            torch.cat([x, x]),
            torch.cat([timestep, timestep]),
            torch.cat([negative_text, positive_text]),
            **{name: torch.cat([value, value]) for name, value in extra.items()},
        ).float()
        negative, positive = both.chunk(2)
        return negative + scale * (positive - negative)

    def _transformer_inputs(
        self, x: torch.Tensor, timestep: torch.Tensor, conditioning: Conditioning, idx: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """The transformer's ``hidden_states``, ``timestep`` and further inputs for these rows (``idx`` of the
        conditioning, None for all): the latents and per-sample timesteps as they are for text-to-video; the
        image-to-video model (:mod:`omni_rl_wan.i2v`) appends its condition here."""
        return x, timestep, {}

    def _forward(
        self, component: str, x: torch.Tensor, timestep: torch.Tensor, embeds: torch.Tensor, **extra: torch.Tensor
    ) -> torch.Tensor:
        self.transformer_calls[component] += 1
        if self.expand_timesteps and timestep.ndim == 1:  # one timestep per latent token, (B, F' x h/2 x w/2)
            _, _, frames, height, width = x.shape
            tokens = (frames // self.temporal_patch_size) * (height // self.patch_size) * (width // self.patch_size)
            timestep = timestep[:, None].expand(-1, tokens)
        expert = self.transformer.expert(component) if isinstance(self.transformer, WanExperts) else self.transformer
        with self.attention():
            return self.call_transformer(
                expert, hidden_states=x, timestep=timestep, encoder_hidden_states=embeds, return_dict=False, **extra
            )[0]

    def _text(self, conditioning: Conditioning, key: str, idx: torch.Tensor | None, batch: int) -> torch.Tensor:
        (embeds,) = self._conditioning_rows(conditioning, (key,), batch, rows=idx)
        return embeds.to(self.device, self.dtype)

    # -- protocol: schedule, shapes, videos ------------------------------------------------------------------

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> torch.Tensor:
        """The pipeline scheduler's shifted sigmas (:mod:`omni_rl_wan.schedule`); Wan's shift does not depend on
        the size. Float32, (num_steps + 1,), ending at 0."""
        return wan_sigmas(self.pipeline.scheduler, num_steps, device=self.device)

    def latent_shape(self, height: int, width: int, num_frames: int = 1) -> tuple[int, ...]:
        """(C, F', H / 8, W / 8) with F' = (num_frames - 1) / 4 + 1 for the real VAE's factors; ``num_frames``
        must be 4k + 1 (WanPipeline rounds other counts; a training config should say what it samples)."""
        temporal = self.vae_scale_factor_temporal
        if num_frames < 1 or (num_frames - 1) % temporal:
            raise ConfigError(
                f"num_frames = {num_frames} is not supported by this Wan pipeline",
                hint=f"num_frames must be {temporal}k + 1 (e.g. 1, {temporal + 1}, {4 * temporal + 1}, 81): the "
                f"VAE compresses time {temporal}x after the first frame",
            )
        channels, h, w = super().latent_shape(height, width)
        return (channels, (num_frames - 1) // temporal + 1, h, w)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents (B, C, F', h, w) -> uint8 frames (B, F, H, W, 3): the pipeline's ``output_type="np"`` x 255,
        rounded."""
        vae = self.vae
        with on_device(self.device, vae, enabled=self.config.offload_vae):
            z = latents.to(self.device, vae.dtype)
            mean, inverse_std = (t.to(z.device, z.dtype) for t in self._latent_stats())
            video = vae.decode(z / inverse_std + mean, return_dict=False)[0]
            frames = self.pipeline.video_processor.postprocess_video(video, output_type="pt")  # (B, F, 3, H, W)
        return (frames.permute(0, 1, 3, 4, 2).float() * 255).round().to(torch.uint8)

    # -- protocol: training state and export (the rest is PipelineModel's) ----------------------------------

    def fsdp_units(self) -> list[torch.nn.Module]:
        """Optional protocol member: one FSDP2 unit per transformer block (30 or 40 in the real models); with two
        experts each expert is a unit too, since the steps call an expert, never the container."""
        if not isinstance(self.transformer, WanExperts):
            return list(self.transformer.blocks)
        experts = list(self.experts.values())
        return [*(block for expert in experts for block in expert.blocks), *experts]

    def build_pipeline(self) -> Any:
        """A WanPipeline sharing this model's modules (the current policy, LoRA on) with its own scheduler and the
        loaded pipeline's ``boundary_ratio`` and ``expand_timesteps`` (config values, not components, so the
        shared builder would drop them and an exported Wan2.2 would run its high-noise expert on every step)."""
        pipeline = super().build_pipeline()
        pipeline.register_to_config(
            boundary_ratio=self.pipeline.config.get("boundary_ratio"),
            expand_timesteps=bool(self.pipeline.config.get("expand_timesteps", False)),
        )
        return pipeline

    def export_pipeline(self, directory: str | Path, *, merged: bool) -> None:
        """As :meth:`PipelineModel.export_pipeline`; with two experts the LoRA export is one file per trained expert
        (:mod:`omni_rl_wan.lora`) and the merged pipeline has each trained expert's LoRA fused in."""
        if not merged or not isinstance(self.transformer, WanExperts):
            super().export_pipeline(directory, merged=merged)
            return
        pipeline = self.build_pipeline()
        for component in self.experts:
            expert = self.experts[component]
            fused = expert
            if component in self.trained_experts:
                fused = merged_copy(expert, what=f"a Wan expert ({component})")
            setattr(pipeline, component, fused)
            pipeline.register_modules(**{component: fused})
        pipeline.save_pretrained(Path(directory), safe_serialization=True)


def _take(tensor: torch.Tensor, idx: torch.Tensor | None) -> torch.Tensor:
    return tensor if idx is None else tensor[idx.to(tensor.device)]


def build_wan_model(config: WanConfig, ctx: BuildContext) -> WanModel:
    """The ``wan`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return WanModel(config, ctx)
