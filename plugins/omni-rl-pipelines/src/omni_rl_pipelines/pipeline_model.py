"""What the diffusers-pipeline model adapters share: training state, policy views, export and offloading.

SD3, FLUX, Qwen-Image and Wan each wrap one diffusers pipeline whose transformer is trained, with LoRA (the
reference policy is adapters off, extra adapters are DiffusionNFT's "old" or AWM's "ema" policy) or in full
(``lora_rank = 0``: the whole transformer is the trained state). Everything on that side of a model does not depend
on the architecture, so it is written once here, in :class:`PipelineModel`, which each adapter subclasses; prompt
encoding, latent layout, guidance and the sigma schedule stay in each model plugin.

Why a library of its own (omni-rl-pipelines): the model plugins depend on it and not on each other, and the core
stays free of diffusers and peft (omni-rl-diffusers is a rollout backend that works with any model).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import torch

from omni_rl.batch import Conditioning
from omni_rl.context import BuildContext
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_pipelines.compat import dtype_kwargs
from omni_rl_pipelines.loading import PipelineKind
from omni_rl_pipelines.lora import TRAINED_ADAPTER, LoraAdapters, merged_copy
from omni_rl_pipelines.speed import apply_speed_options, attention_context, graphed_calls

#: What :meth:`PipelineModel.save_lora` writes for full fine-tuning (``lora_rank = 0``): the whole transformer.
FULL_TRANSFORMER_DIR = "transformer"

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@contextmanager
def on_device(device: torch.device, *modules: torch.nn.Module, enabled: bool = True) -> Iterator[None]:
    """Offloading: ``modules`` on ``device`` for the body, back on the CPU after (also when it raises); nothing
    when not ``enabled`` (the modules then live on the device all along)."""
    if not enabled:
        yield
        return
    for module in modules:
        module.to(device)
    try:
        yield
    finally:
        for module in modules:
            module.to("cpu")


class FullTransformerFiles:
    """Full fine-tuning's files: every weight of one (possibly FSDP2-sharded) transformer under
    ``<directory>/transformer``, as ``save_pretrained`` writes them (config.json and the safetensors weights).

    From a sharded transformer ``save_pretrained`` would write this worker's shards under an ``FSDP...`` class name,
    so the weights are gathered whole one tensor at a time instead (a collective: every worker calls it) and rank 0
    writes."""

    def __init__(self, transformer: torch.nn.Module, transformer_class: str) -> None:
        self.transformer = transformer
        #: the diffusers class that loads the files back
        self.transformer_class = transformer_class

    def save(self, directory: str | Path) -> None:
        from safetensors.torch import save_file

        from omni_rl.engine.fsdp import gather_state, is_sharded

        target = Path(directory) / FULL_TRANSFORMER_DIR
        if not any(is_sharded(p) for p in self.transformer.parameters()):
            self.transformer.save_pretrained(target)
            return
        state = gather_state(self.transformer.state_dict())
        if state is None:
            return
        config = json.loads(self.transformer.to_json_string())
        config["_class_name"] = str(config["_class_name"]).removeprefix("FSDP")
        target.mkdir(parents=True, exist_ok=True)
        (target / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        save_file(state, str(target / "diffusion_pytorch_model.safetensors"), metadata={"format": "pt"})

    def load(self, directory: str | Path, *, dtype: torch.dtype) -> None:
        import diffusers

        source = Path(directory) / FULL_TRANSFORMER_DIR
        if not (source / "config.json").is_file():
            raise RuntimeFailure(
                f"no fully fine-tuned transformer in {source}",
                hint="lora_rank = 0 checkpoints hold a transformer/ folder written by save_lora",
            )
        loaded = getattr(diffusers, self.transformer_class).from_pretrained(source, **dtype_kwargs(dtype))
        with torch.no_grad():
            self.transformer.load_state_dict(loaded.state_dict())


class PipelineModel:
    """The architecture-independent part of a diffusers-pipeline :class:`~omni_rl.protocols.DiffusionModel`.

    A subclass sets the class attributes; its ``__init__`` calls :meth:`_open_pipeline` (path, device, dtype,
    pipeline), places the components (:meth:`_place_components` where they may be offloaded), sets the instance
    attributes below and calls :meth:`_prepare_transformer`; it writes the prompt encoding,
    :meth:`predict_velocity`, the schedule and the VAE side itself."""

    #: the pipeline: how its directory is checked, built when tiny and missing, and loaded, and how messages name it
    pipeline_kind: ClassVar[PipelineKind]
    #: the diffusers transformer class (full fine-tuning's checkpoints)
    transformer_class: ClassVar[str]
    #: the LoRA bookkeeping (and file format) of this architecture: a :class:`LoraAdapters` subclass
    adapters_class: ClassVar[type[LoraAdapters]]

    config: Any
    device: torch.device
    dtype: torch.dtype
    pipeline: Any
    transformer: Any
    vae_scale_factor: int
    #: image size multiple in latent pixels beyond the VAE's (the transformer's patch size, 2 for 2x2 packing)
    patch_size: int
    latent_channels: int

    @property
    def model_label(self) -> str:
        """How messages name the architecture ("SD3", "FLUX", "Qwen-Image", "Wan"): the pipeline kind's label."""
        return self.pipeline_kind.label

    @property
    def pipeline_class(self) -> str:
        """The diffusers pipeline class (``build_pipeline``, exports): the pipeline kind's."""
        return self.pipeline_kind.pipeline_class

    # -- building: the steps every adapter's __init__ shares ---------------------------------------------------

    def _open_pipeline(self, config: Any, ctx: BuildContext | None) -> BuildContext:
        """Resolve ``config.path`` (writing the tiny pipeline first when ``build_tiny_if_missing`` asks for it) and
        load the pipeline on the CPU in ``config.dtype``; sets ``config``, ``pipeline_path``, ``device``, ``dtype``,
        ``pipeline`` and ``transformer``, and returns the build context (a default one when ``ctx`` is None)."""
        ctx = ctx or BuildContext()
        self.config = config
        #: the local directory (or hub id) the weights came from
        self.pipeline_path: str = self._resolve_path(config)
        self.device = torch.device(ctx.device)
        self.dtype = DTYPES[config.dtype]
        #: the loaded pipeline; its modules are the ones this model runs and trains
        self.pipeline = self._load_pipeline(config, self.pipeline_path)
        self.transformer = self.pipeline.transformer
        return ctx

    def _resolve_path(self, config: Any) -> str:
        """The directory (checked) or hub id to load; a model whose tiny builder takes options overrides this."""
        return self.pipeline_kind.resolve(config)

    def _load_pipeline(self, config: Any, source: str) -> Any:
        """The pipeline loaded from ``source``; a model that skips components overrides this."""
        return self.pipeline_kind.load(config, source)

    def _place_components(self, text_encoders: Sequence[torch.nn.Module]) -> None:
        """The transformer on the device; the VAE and ``text_encoders`` there too, or on the CPU between uses when
        ``offload_vae`` / ``offload_text_encoders`` (:class:`~omni_rl_pipelines.options.MemoryOptions`); all but the
        transformer frozen, in eval mode. Sets ``vae``."""
        self.transformer.to(self.device)
        self.vae = self.pipeline.vae
        self.vae.to("cpu" if self.config.offload_vae else self.device)
        for module in text_encoders:
            module.to("cpu" if self.config.offload_text_encoders else self.device)
        for module in (self.vae, *text_encoders):
            module.requires_grad_(False).eval()

    def _prepare_transformer(self, seed: int) -> None:
        """Freeze what is not trained, inject LoRA (``lora_rank > 0``, seeded so every worker starts alike) and turn
        on gradient checkpointing and the speed options when asked to. Every module stays in eval mode: none has
        dropout, and a LoRA dropout would make the recomputed log-probs differ from the rollout's."""
        self.transformer.requires_grad_(self.config.lora_rank == 0).eval()
        self.adapters: LoraAdapters | None = None
        if self.config.lora_rank > 0:
            self.adapters = self.adapters_class(self.transformer, self.config, seed=seed)
        #: full fine-tuning only: a frozen copy of the transformer kept by :meth:`keep_reference_copy`
        self.reference_transformer: Any = None
        self._apply_module_options(self.transformer)

    def _apply_module_options(self, transformer: Any) -> None:
        """Gradient checkpointing and the speed options on one transformer (each of Wan2.2's experts goes through
        here), after LoRA is injected so compiled blocks include it."""
        if self.config.gradient_checkpointing:
            transformer.enable_gradient_checkpointing()
        apply_speed_options(self.config, transformer, self.pipeline.vae, self.device, self.model_label)

    # -- the checks every predict_velocity shares --------------------------------------------------------------

    def _sigmas(self, sigmas: torch.Tensor, batch: int) -> torch.Tensor:
        """The per-sample sigmas, float32 on the device: one value is broadcast to the ``batch`` samples."""
        sigma = torch.as_tensor(sigmas, dtype=torch.float32, device=self.device).reshape(-1)
        if sigma.numel() == 1:
            sigma = sigma.expand(batch)
        return sigma

    def _conditioning_rows(
        self, conditioning: Conditioning, keys: Sequence[str], batch: int, rows: torch.Tensor | None = None
    ) -> list[torch.Tensor]:
        """The ``keys`` tensors of ``conditioning`` (their ``rows`` only, when given), as stored: a RuntimeFailure
        when one is missing (the negatives are encoded only for CFG) or their samples are not the latents'."""
        tensors = conditioning.tensors
        if any(key not in tensors for key in keys):
            raise RuntimeFailure(
                f"{self.model_label} conditioning lacks {keys[0]!r}",
                hint="encode the prompts with the guidance scale used for sampling (the negative prompt is encoded "
                "only when guidance_scale > 1)",
            )
        values = [tensors[key] if rows is None else tensors[key][rows.to(tensors[key].device)] for key in keys]
        if values[0].shape[0] != batch:
            raise RuntimeFailure(
                f"conditioning has {values[0].shape[0]} samples but the latents have {batch}",
                hint="index the Conditioning with the same samples as the latents",
            )
        return values

    def _latent_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, 1 / std) shaped (1, C, 1, 1, 1), as the pipelines of VAEs with per-channel latent statistics
        (``latents_mean`` / ``latents_std``: Qwen-Image's and Wan's) build them."""
        config = self.vae.config
        mean = torch.tensor(config.latents_mean).view(1, config.z_dim, 1, 1, 1)
        inverse_std = 1.0 / torch.tensor(config.latents_std).view(1, config.z_dim, 1, 1, 1)
        return mean, inverse_std

    @property
    def old_log_probs_with_grad(self) -> bool:
        """Read by the update engine: recompute the old log-probs through the trained (grad) forward, because a
        compiled block runs other kernels with gradients than without, and a graphed no-grad call is not the
        trained forward either (omni_rl_pipelines.speed)."""
        return bool(self.config.old_log_probs_with_grad)

    @functools.cached_property
    def graphs(self) -> Any:
        """With ``cuda_graphs``: what serves the no-grad transformer calls from captured graphs
        (omni_rl_pipelines.cuda_graphs); None without."""
        return graphed_calls(self.config)

    def call_transformer(self, module: torch.nn.Module, **kwargs: Any) -> Any:
        """``module(**kwargs)`` for every transformer forward of the model, through its CUDA graphs when
        ``cuda_graphs`` is on (no-grad calls only; the graphs decide)."""
        if self.graphs is None:
            return module(**kwargs)
        return self.graphs(module, **kwargs)

    def eager_forwards(self) -> contextlib.AbstractContextManager[Any]:
        """Optional protocol member: a context in which every transformer call runs eagerly, with no CUDA graph
        captured or replayed (the "auto" batch probes run in it)."""
        return contextlib.nullcontext() if self.graphs is None else self.graphs.paused()

    def attention(self) -> contextlib.AbstractContextManager[Any]:
        """The context of every transformer call: ``[model] options.attention_backend``'s SDPA kernel."""
        return attention_context(self.config)

    # -- protocol: shapes --------------------------------------------------------------------------------------

    def _patch_note(self) -> str:
        return f"patch size {self.patch_size}"

    def latent_shape(self, height: int, width: int) -> tuple[int, int, int]:
        """(C, H / f, W / f) for the VAE's factor f (16 channels, f = 8 for the real models); sizes must be whole
        transformer patches."""
        multiple = self.vae_scale_factor * self.patch_size
        if height <= 0 or width <= 0 or height % multiple or width % multiple:
            raise ConfigError(
                f"image size {height}x{width} is not supported by this {self.model_label} pipeline",
                hint=f"height and width must be positive multiples of {multiple} (VAE factor "
                f"{self.vae_scale_factor} x {self._patch_note()})",
            )
        return (self.latent_channels, height // self.vae_scale_factor, width // self.vae_scale_factor)

    def _check_images(self, images: torch.Tensor) -> None:
        """``encode_images``' argument check: uint8 (B, H, W, 3) of a size the model takes."""
        if images.dtype != torch.uint8 or images.ndim != 4 or images.shape[-1] != 3:
            raise RuntimeFailure(
                f"encode_images takes uint8 images of shape (B, H, W, 3), got {images.dtype} {tuple(images.shape)}",
                hint="pass images as decode returns them",
            )
        self.latent_shape(int(images.shape[1]), int(images.shape[2]))  # raises for sizes the model cannot take

    def _pixels(self, images: torch.Tensor) -> torch.Tensor:
        """``encode_images``' input for the VAE: uint8 (B, H, W, 3) checked, then float32 (B, 3, H, W) in [-1, 1] on
        the device, as the pipelines' image processors ``normalize``."""
        self._check_images(images)
        return images.to(self.device).permute(0, 3, 1, 2).float() / 255.0 * 2.0 - 1.0

    @staticmethod
    def _uint8_images(image: torch.Tensor) -> torch.Tensor:
        """The image processor's (B, 3, H, W) output in [0, 1] as ``decode`` returns it: uint8 (B, H, W, 3), the
        pipeline's ``output_type="np"`` times 255, rounded."""
        return (image.permute(0, 2, 3, 1).float() * 255).round().to(torch.uint8)

    # -- protocol: training state ------------------------------------------------------------------------------

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
        self.reference_transformer = copy.deepcopy(self.transformer).requires_grad_(False).eval()

    def save_lora(self, directory: str | Path) -> None:
        """Write the trained LoRA as ``pytorch_lora_weights.safetensors`` (diffusers' format of
        :attr:`pipeline_class`, loadable with its ``load_lora_weights``). With ``lora_rank = 0`` the trained weights
        are the whole transformer, written with ``save_pretrained`` under ``directory/transformer``.

        With the transformer sharded by FSDP2 (``[cluster] strategy = "fsdp2"``) this is a collective: every
        worker calls it, the weights are gathered whole one tensor at a time, and rank 0 writes."""
        if self.adapters is None:
            FullTransformerFiles(self.transformer, self.transformer_class).save(directory)
            return
        self.adapters.save(directory, name=TRAINED_ADAPTER)

    def load_lora(self, directory: str | Path) -> None:
        """Load weights written by :meth:`save_lora` into the trained adapter (or the full transformer)."""
        if self.adapters is None:
            FullTransformerFiles(self.transformer, self.transformer_class).load(directory, dtype=self.dtype)
            return
        self.adapters.load(directory, name=TRAINED_ADAPTER)

    # -- extra adapters (DiffusionNFT's "old", AWM's "ema") -----------------------------------------------------

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
                f"{what} needs LoRA, but this {self.model_label} model fine-tunes the full transformer (lora_rank = 0)",
                hint="set [model] options.lora_rank > 0, or use a loss without a reference/old policy view",
            )
        return self.adapters

    # -- export ------------------------------------------------------------------------------------------------

    def build_pipeline(self) -> Any:
        """A :attr:`pipeline_class` pipeline sharing this model's modules (the current policy, LoRA on) with its
        own scheduler instance, for export, visual checks and tests."""
        import diffusers

        components = dict(self.pipeline.components)
        scheduler = components["scheduler"]
        components["scheduler"] = type(scheduler).from_config(scheduler.config)
        return getattr(diffusers, self.pipeline_class)(**components)

    def export_pipeline(self, directory: str | Path, *, merged: bool) -> None:
        """Write the current policy for use without omni-rl (``omni-rl export``).

        ``merged = False``: the trained LoRA as :meth:`save_lora` writes it, for
        ``<pipeline class>.from_pretrained(base).load_lora_weights(directory)``. ``merged = True``: the whole
        pipeline (``save_pretrained``) whose transformer has the LoRA fused in and the adapters removed, so
        ``DiffusionPipeline.from_pretrained(directory)`` loads plain weights that need neither peft nor the base
        model. Fusing happens on a copy of the transformer (one transformer's worth of extra memory), so this
        model keeps its adapters and can go on training or sampling.
        """
        if not merged:
            if self.adapters is None:
                raise RuntimeFailure(
                    f"this {self.model_label} model fine-tunes the full transformer (lora_rank = 0), so there is no "
                    "LoRA to export",
                    hint="export the merged pipeline instead (omni-rl export ... --merged)",
                )
            self.save_lora(directory)
            return
        pipeline = self.build_pipeline()
        pipeline.transformer = self._merged_transformer()
        pipeline.save_pretrained(Path(directory), safe_serialization=True)

    def _merged_transformer(self) -> Any:
        """A copy of the transformer with the trained adapter fused into its weights and every adapter removed."""
        if self.adapters is None:
            return self.transformer  # full fine-tuning: the weights are already plain
        return merged_copy(self.transformer)
