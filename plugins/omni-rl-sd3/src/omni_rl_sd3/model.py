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

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import torch

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_sd3.compat import dtype_kwargs
from omni_rl_sd3.config import SD3Config
from omni_rl_sd3.loading import load_pipeline, resolve_pipeline_path
from omni_rl_sd3.lora import TRAINED_ADAPTER, LoraAdapters

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
#: What :meth:`SD3Model.save_lora` writes for full fine-tuning (``lora_rank = 0``): the whole transformer.
FULL_TRANSFORMER_DIR = "transformer"


class SD3Model:
    """A loaded SD3 pipeline whose transformer is trained (LoRA by default), inside one policy worker."""

    def __init__(self, config: SD3Config, ctx: BuildContext | None = None) -> None:
        ctx = ctx or BuildContext()
        self.config = config
        #: the local directory (or hub id) the weights came from
        self.pipeline_path: str = resolve_pipeline_path(config)
        self.device = torch.device(ctx.device)
        self.dtype = _DTYPES[config.dtype]
        #: the loaded pipeline; its modules are the ones this model runs and trains
        self.pipeline = load_pipeline(_resolved(config, self.pipeline_path))
        self.pipeline.to(self.device)
        for name in ("vae", "text_encoder", "text_encoder_2", "text_encoder_3"):
            module = getattr(self.pipeline, name, None)
            if module is not None:
                module.requires_grad_(False).eval()
        self.transformer = self.pipeline.transformer
        self.transformer.requires_grad_(config.lora_rank == 0).eval()
        self.adapters: LoraAdapters | None = None
        #: full fine-tuning only: a frozen copy of the transformer kept by :meth:`keep_reference_copy`
        self.reference_transformer: Any = None
        if config.lora_rank > 0:
            self.adapters = LoraAdapters(self.transformer, config, seed=ctx.seed)
        if config.gradient_checkpointing:
            self.transformer.enable_gradient_checkpointing()
        self.vae = self.pipeline.vae
        self.vae_scale_factor: int = self.pipeline.vae_scale_factor
        self.patch_size: int = self.transformer.config.patch_size
        self.latent_channels: int = self.transformer.config.in_channels
        self.num_train_timesteps: int = self.pipeline.scheduler.config.num_train_timesteps

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
        order, exactly as the pipeline batches them, so rollouts match the pipeline bit for bit in float32."""
        batch = latents.shape[0]
        x = latents.to(self.device, self.dtype)
        sigma = torch.as_tensor(sigmas, dtype=torch.float32, device=self.device).reshape(-1)
        if sigma.numel() == 1:
            sigma = sigma.expand(batch)
        timestep = sigma * self.num_train_timesteps
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
        return self.transformer(
            hidden_states=x,
            timestep=timestep,
            encoder_hidden_states=embeds,
            pooled_projections=pooled,
            return_dict=False,
        )[0]

    def _conditioning(
        self, conditioning: Conditioning, key: str, pooled_key: str, batch: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        tensors = conditioning.tensors
        if key not in tensors or pooled_key not in tensors:
            raise RuntimeFailure(
                f"SD3 conditioning lacks {key!r}",
                hint="encode the prompts with the guidance scale used for sampling (negatives are encoded only "
                "when guidance_scale > 1)",
            )
        embeds, pooled = tensors[key], tensors[pooled_key]
        if embeds.shape[0] != batch:
            raise RuntimeFailure(
                f"conditioning has {embeds.shape[0]} samples but the latents have {batch}",
                hint="index the Conditioning with the same samples as the latents",
            )
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

    def latent_shape(self, height: int, width: int) -> tuple[int, int, int]:
        """(16, H / 8, W / 8) for real SD3 (the VAE's downsampling); sizes must be whole transformer patches."""
        multiple = self.vae_scale_factor * self.patch_size
        if height <= 0 or width <= 0 or height % multiple or width % multiple:
            raise ConfigError(
                f"image size {height}x{width} is not supported by this SD3 pipeline",
                hint=f"height and width must be positive multiples of {multiple} (VAE factor "
                f"{self.vae_scale_factor} x patch size {self.patch_size})",
            )
        return (self.latent_channels, height // self.vae_scale_factor, width // self.vae_scale_factor)

    @torch.no_grad()
    def decode(self, latents: torch.Tensor) -> torch.Tensor:
        """Latents -> uint8 (B, H, W, 3), as the pipeline's ``output_type="np"`` times 255, rounded."""
        config = self.vae.config
        z = latents.to(self.device, self.vae.dtype)
        z = z / config.scaling_factor + (config.shift_factor or 0.0)
        image = self.vae.decode(z, return_dict=False)[0]
        image = self.pipeline.image_processor.postprocess(image, output_type="pt")
        return (image.permute(0, 2, 3, 1).float() * 255).round().to(torch.uint8)

    @torch.no_grad()
    def encode_images(self, images: torch.Tensor) -> torch.Tensor:
        """uint8 images (B, H, W, 3) -> float32 latents (B, C, h, w), the inverse of :meth:`decode`'s scaling.

        Optional protocol member (offline preference data): pixels go to [-1, 1] as the image processor's
        ``normalize`` does, through the VAE encoder, and the posterior's mean is scaled as the pipeline scales
        latents, ``(z - shift_factor) * scaling_factor``. The mean rather than a posterior sample makes the
        latents a deterministic function of the image, so they can be encoded once and cached.
        """
        if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[-1] != 3:
            raise RuntimeFailure(
                f"encode_images takes uint8 images of shape (B, H, W, 3), got {images.dtype} {tuple(images.shape)}",
                hint="pass images as decode returns them",
            )
        self.latent_shape(int(images.shape[1]), int(images.shape[2]))  # raises for sizes the model cannot take
        config = self.vae.config
        pixels = images.to(self.device).permute(0, 3, 1, 2).float() / 255.0 * 2.0 - 1.0
        posterior = self.vae.encode(pixels.to(self.vae.dtype), return_dict=False)[0]
        z = (posterior.mode() - (config.shift_factor or 0.0)) * config.scaling_factor
        return z.float()

    # -- protocol: training state ----------------------------------------------------------------------------

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        """The trained adapter's LoRA weights (float32), or every transformer weight when ``lora_rank = 0``."""
        if self.adapters is None:
            return list(self.transformer.parameters())
        return self.adapters.trained_parameters()

    @contextmanager
    def disable_adapters(self) -> Iterator[None]:
        """The reference policy: the base transformer with every adapter off (restored on exit); with full
        fine-tuning, the frozen copy :meth:`keep_reference_copy` kept."""
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
        """Optional protocol member: make the reference view available under full fine-tuning.

        With LoRA the reference is free (adapters off), so this does nothing. With ``lora_rank = 0`` it keeps a
        frozen copy of the transformer as it is now (one more transformer in memory), which
        :meth:`disable_adapters` then runs. Losses that need the reference call it from their ``setup`` hook,
        before any checkpoint is loaded, so the copy holds the pretrained weights.
        """
        if self.adapters is not None or self.reference_transformer is not None:
            return
        import copy

        self.reference_transformer = copy.deepcopy(self.transformer).requires_grad_(False).eval()

    def save_lora(self, directory: str | Path) -> None:
        """Write the trained LoRA as ``pytorch_lora_weights.safetensors`` (diffusers SD3 format, loadable with
        ``StableDiffusion3Pipeline.load_lora_weights``). With ``lora_rank = 0`` the trained weights are the whole
        transformer, written with ``save_pretrained`` under ``directory/transformer``.

        With the transformer sharded by FSDP2 (``[cluster] strategy = "fsdp2"``) this is a collective: every
        worker calls it, the weights are gathered whole one tensor at a time, and rank 0 writes."""
        if self.adapters is None:
            if _is_sharded(self.transformer):
                self._save_sharded_transformer(Path(directory) / FULL_TRANSFORMER_DIR)
                return
            self.transformer.save_pretrained(Path(directory) / FULL_TRANSFORMER_DIR)
            return
        self.adapters.save(directory, name=TRAINED_ADAPTER)

    def _save_sharded_transformer(self, directory: Path) -> None:
        """What ``save_pretrained`` writes (config.json and one safetensors file), from an FSDP2-sharded
        transformer: ``save_pretrained`` itself would write this worker's shards under an ``FSDP...`` class name."""
        import json

        from safetensors.torch import save_file

        from omni_rl.runtime.fsdp import gather_state

        state = gather_state(self.transformer.state_dict())
        if state is None:
            return
        config = json.loads(self.transformer.to_json_string())
        config["_class_name"] = str(config["_class_name"]).removeprefix("FSDP")
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        save_file(state, str(directory / "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})

    def load_lora(self, directory: str | Path) -> None:
        """Load weights written by :meth:`save_lora` into the trained adapter (or the full transformer)."""
        if self.adapters is None:
            self._load_full_transformer(Path(directory) / FULL_TRANSFORMER_DIR)
            return
        self.adapters.load(directory, name=TRAINED_ADAPTER)

    def _load_full_transformer(self, directory: Path) -> None:
        from diffusers import SD3Transformer2DModel

        if not (directory / "config.json").is_file():
            raise RuntimeFailure(
                f"no fully fine-tuned transformer in {directory}",
                hint="lora_rank = 0 checkpoints hold a transformer/ folder written by save_lora",
            )
        loaded = SD3Transformer2DModel.from_pretrained(directory, **dtype_kwargs(self.dtype))
        with torch.no_grad():
            self.transformer.load_state_dict(loaded.state_dict())

    # -- extra adapters (DiffusionNFT's "old" policy) ----------------------------------------------------------

    def add_adapter(self, name: str, *, copy_from: str | None = TRAINED_ADAPTER) -> None:
        """Add a frozen LoRA adapter with the trained one's config, by default a copy of it."""
        self._require_adapters(f"adapter {name!r}").add(name, copy_from=copy_from)

    def use_adapter(self, name: str) -> Any:
        """Context in which forwards use adapter ``name`` (e.g. ``"old"``) instead of the trained one."""
        return self._require_adapters(f"adapter {name!r}").use(name)

    def blend_adapter(self, target: str, source: str = TRAINED_ADAPTER, *, decay: float) -> None:
        """``target <- decay * target + (1 - decay) * source`` (DiffusionNFT's old-policy update)."""
        self._require_adapters(f"adapter {target!r}").blend(target, source, decay=decay)

    def _require_adapters(self, what: str) -> LoraAdapters:
        if self.adapters is None:
            raise RuntimeFailure(
                f"{what} needs LoRA, but this SD3 model fine-tunes the full transformer (lora_rank = 0)",
                hint="set [model] options.lora_rank > 0, or use a loss without a reference/old policy view",
            )
        return self.adapters

    # -- export ------------------------------------------------------------------------------------------------

    def build_pipeline(self) -> Any:
        """A ``StableDiffusion3Pipeline`` sharing this model's modules (the current policy, LoRA on) with its own
        scheduler instance, for export, visual checks and tests."""
        from diffusers import StableDiffusion3Pipeline

        components = dict(self.pipeline.components)
        scheduler = components["scheduler"]
        components["scheduler"] = type(scheduler).from_config(scheduler.config)
        return StableDiffusion3Pipeline(**components)

    def export_pipeline(self, directory: str | Path, *, merged: bool) -> None:
        """Write the current policy for use without omni-rl (``omni-rl export``).

        ``merged = False``: the trained LoRA as :meth:`save_lora` writes it, for
        ``StableDiffusion3Pipeline.from_pretrained(base).load_lora_weights(directory)``. ``merged = True``: the
        whole pipeline (``save_pretrained``) whose transformer has the LoRA fused in and the adapters removed, so
        ``DiffusionPipeline.from_pretrained(directory)`` loads plain weights that need neither peft nor the base
        model. Fusing happens on a copy of the transformer (one transformer's worth of extra memory), so this
        model keeps its adapters and can go on training or sampling.
        """
        if not merged:
            if self.adapters is None:
                raise RuntimeFailure(
                    "this SD3 model fine-tunes the full transformer (lora_rank = 0), so there is no LoRA to export",
                    hint="export the merged pipeline instead (omni-rl export ... --merged)",
                )
            self.save_lora(directory)
            return
        pipeline = self.build_pipeline()
        pipeline.transformer = self._merged_transformer()
        pipeline.save_pretrained(Path(directory), safe_serialization=True)

    def _merged_transformer(self) -> Any:
        """A copy of the transformer with the trained adapter fused into its weights and every adapter removed."""
        import copy

        if self.adapters is None:
            return self.transformer  # full fine-tuning: the weights are already plain
        merged = copy.deepcopy(self.transformer)
        others = [name for name in merged.peft_config if name != TRAINED_ADAPTER]
        if others:  # e.g. DiffusionNFT's "old" policy: not part of the exported model
            merged.delete_adapters(others)
        try:
            merged.fuse_lora(safe_fusing=True, adapter_names=[TRAINED_ADAPTER])
        except ValueError as error:  # safe_fusing refuses NaN/inf weights rather than writing a broken model
            raise RuntimeFailure(
                f"cannot merge the LoRA into the transformer: {error}",
                hint="the checkpoint holds non-finite LoRA weights; export an earlier step (--step N)",
            ) from error
        merged.unload_lora()
        return merged.requires_grad_(False)


def _is_sharded(module: torch.nn.Module) -> bool:
    from omni_rl.runtime.fsdp import is_sharded

    return any(is_sharded(p) for p in module.parameters())


def _resolved(config: SD3Config, path: str) -> SD3Config:
    """``config`` pointing at the resolved path (so a tiny pipeline is never built twice)."""
    return attrs.evolve(config, path=path, build_tiny_if_missing=False)


def build_sd3_model(config: SD3Config, ctx: BuildContext) -> SD3Model:
    """The ``sd3`` factory: load ``config.path`` on ``ctx.device`` with LoRA (or full fine-tuning)."""
    return SD3Model(config, ctx)
