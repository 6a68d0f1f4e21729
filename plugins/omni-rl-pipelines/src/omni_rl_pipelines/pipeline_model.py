"""What the diffusers-pipeline model adapters share: training state, policy views, export and offloading.

SD3, FLUX and Qwen-Image each wrap one diffusers pipeline whose transformer is trained, with LoRA (the reference
policy is adapters off, extra adapters are DiffusionNFT's "old" or AWM's "ema" policy) or in full (``lora_rank =
0``: the whole transformer is the trained state). Everything on that side of a model does not depend on the
architecture, so it is written once here, in :class:`PipelineModel`, which each adapter subclasses; prompt encoding,
latent layout, guidance and the sigma schedule stay in each plugin.

Why here: omni-rl-sd3 was the first diffusers model adapter, and the FLUX and Qwen-Image plugins depend on it
anyway (FLUX for its offline tokenizers, both for the LoRA bookkeeping of :mod:`omni_rl_sd3.lora`). The core stays
free of diffusers and peft, and omni-rl-diffusers is a rollout backend that works with any model.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import torch

from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_sd3.compat import dtype_kwargs
from omni_rl_sd3.lora import TRAINED_ADAPTER, LoraAdapters
from omni_rl_sd3.speed import apply_speed_options, attention_context, graphed_calls

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

    A subclass sets the class attributes, loads its pipeline, sets the instance attributes below and calls
    :meth:`_prepare_transformer`; it writes the prompt encoding, :meth:`predict_velocity`, the schedule and the VAE
    side itself."""

    #: how messages name the architecture ("SD3", "FLUX", "Qwen-Image")
    model_label: ClassVar[str]
    #: the diffusers pipeline class (``build_pipeline``, exports)
    pipeline_class: ClassVar[str]
    #: the diffusers transformer class (full fine-tuning's checkpoints)
    transformer_class: ClassVar[str]
    #: the LoRA bookkeeping (and file format) of this architecture
    adapters_class: ClassVar[type[LoraAdapters]] = LoraAdapters

    config: Any
    device: torch.device
    dtype: torch.dtype
    pipeline: Any
    transformer: Any
    vae_scale_factor: int
    #: image size multiple in latent pixels beyond the VAE's (the transformer's patch size, 2 for 2x2 packing)
    patch_size: int
    latent_channels: int

    def _prepare_transformer(self, seed: int) -> None:
        """Freeze what is not trained, inject LoRA (``lora_rank > 0``, seeded so every worker starts alike) and turn
        on gradient checkpointing when asked to. Every module stays in eval mode: none has dropout, and a LoRA
        dropout would make the recomputed log-probs differ from the rollout's."""
        self.transformer.requires_grad_(self.config.lora_rank == 0).eval()
        self.adapters: LoraAdapters | None = None
        if self.config.lora_rank > 0:
            self.adapters = self.adapters_class(self.transformer, self.config, seed=seed)
        #: full fine-tuning only: a frozen copy of the transformer kept by :meth:`keep_reference_copy`
        self.reference_transformer: Any = None
        if self.config.gradient_checkpointing:
            self.transformer.enable_gradient_checkpointing()
        apply_speed_options(self.config, self.transformer, self.pipeline.vae, self.device, self.model_label)

    @property
    def old_log_probs_with_grad(self) -> bool:
        """Read by the update engine: recompute the old log-probs through the trained (grad) forward, because a
        compiled block runs other kernels with gradients than without, and a graphed no-grad call is not the
        trained forward either (omni_rl_sd3.speed)."""
        return bool(self.config.old_log_probs_with_grad)

    @functools.cached_property
    def graphs(self) -> Any:
        """With ``cuda_graphs``: what serves the no-grad transformer calls from captured graphs
        (omni_rl_sd3.cuda_graphs); None without."""
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
