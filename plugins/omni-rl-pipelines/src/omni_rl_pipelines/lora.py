"""LoRA adapters on a diffusers transformer through peft: the trained adapter, extra named ones, and their views.

RL fine-tuning evaluates up to three policies from one set of base weights: the current policy (the trained
adapter, ``"default"``), the reference (adapters off) and, for DiffusionNFT, an ``"old"`` policy kept as a second
adapter that trails the trained one. This class owns that state so the invariants hold whatever view was used
last: only the trained adapter's weights require grad, and every view restores the previous one on exit.

peft toggles ``requires_grad`` itself when adapters are switched or disabled (it freezes every adapter on
``disable_adapters`` and unfreezes the active one on ``set_adapter``), so after every switch we re-assert ours.

None of this depends on the architecture: each model plugin subclasses :class:`LoraAdapters`, setting only which
diffusers pipeline class reads and writes the files (all use the ``transformer.``-prefixed peft keys with the LoRA
config as metadata), how error messages name the model and the hint for a target that matches nothing.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

import torch

from omni_rl.errors import ConfigError, RuntimeFailure

TRAINED_ADAPTER = "default"
LORA_WEIGHT_NAME = "pytorch_lora_weights.safetensors"


def make_lora_config(config: Any) -> Any:
    """The peft ``LoraConfig`` for ``config`` (B starts at zero, so the policy starts at the base model)."""
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.effective_lora_alpha,
        target_modules=list(config.lora_target_modules),
        init_lora_weights=True if config.lora_init == "default" else "gaussian",
        lora_dropout=0.0,
    )


def merged_copy(transformer: torch.nn.Module, *, what: str = "the transformer") -> Any:
    """A copy of ``transformer`` with the trained adapter fused into its weights and every adapter removed (the
    export of a merged pipeline; ``what`` names the module in the error). Extra adapters such as DiffusionNFT's
    "old" policy are not part of the exported model."""
    import copy

    merged: Any = copy.deepcopy(transformer)
    others = [name for name in merged.peft_config if name != TRAINED_ADAPTER]
    if others:
        merged.delete_adapters(others)
    try:
        merged.fuse_lora(safe_fusing=True, adapter_names=[TRAINED_ADAPTER])
    except ValueError as error:  # safe_fusing refuses NaN/inf weights rather than writing a broken model
        raise RuntimeFailure(
            f"cannot merge the LoRA into {what}: {error}",
            hint="the checkpoint holds non-finite LoRA weights; export an earlier step (--step N)",
        ) from error
    merged.unload_lora()
    return merged.requires_grad_(False)


class LoraAdapters:
    """Named LoRA adapters injected into one transformer; ``"default"`` is the one the optimizer trains.

    ``config`` is the model's options: ``lora_rank``, ``effective_lora_alpha``, ``lora_target_modules`` and
    ``lora_init`` are read (every model plugin's config has them)."""

    #: the diffusers pipeline class whose ``save_lora_weights`` / ``lora_state_dict`` write and read the files (each
    #: model plugin's subclass sets it)
    pipeline_class: ClassVar[str]
    #: how error messages name the transformer ("SD3", "FLUX")
    model_label: ClassVar[str]
    #: the hint for a ``lora_target_modules`` entry that matches no module
    target_hint: ClassVar[str] = (
        "lora_target_modules are dotted-name suffixes of transformer modules, e.g. 'attn.to_q', 'attn.to_out.0'"
    )

    def __init__(self, transformer: torch.nn.Module, config: Any, *, seed: int = 0) -> None:
        self.transformer = transformer
        self.config = config
        #: LoRA A is random: seeding its init makes every worker of a run start from the same weights without
        #: relying on a broadcast (and leaves the caller's RNG alone)
        self.seed = seed
        self._disabled_depth = 0
        self._active = TRAINED_ADAPTER
        self._inject(TRAINED_ADAPTER)

    # -- adapters --------------------------------------------------------------------------------------------

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.transformer.peft_config)

    @property
    def active(self) -> str:
        return self._active

    def trained_parameters(self) -> list[torch.nn.Parameter]:
        # looked up each time: FSDP2 (``[cluster] strategy = "fsdp2"``) replaces the parameters with shards
        return self.parameters_of(TRAINED_ADAPTER)

    def parameters_of(self, name: str) -> list[torch.nn.Parameter]:
        """The LoRA weights of adapter ``name``, in a stable (module) order."""
        marker = f".{name}."
        return [p for n, p in self.transformer.named_parameters() if "lora_" in n and marker in n]

    def add(self, name: str, *, copy_from: str | None = TRAINED_ADAPTER) -> None:
        """Inject a second adapter with the trained one's config (e.g. ``"old"``), frozen, optionally a copy."""
        if name in self.names:
            raise RuntimeFailure(f"LoRA adapter {name!r} already exists", hint=f"existing: {list(self.names)}")
        self._inject(name)
        if copy_from is not None:
            self.blend(name, copy_from, decay=0.0)

    @torch.no_grad()
    def blend(self, target: str, source: str, *, decay: float) -> None:
        """``target <- decay * target + (1 - decay) * source``, weight by weight (decay 0 copies)."""
        for name in (target, source):
            if name not in self.names:
                raise RuntimeFailure(f"no LoRA adapter named {name!r}", hint=f"existing: {list(self.names)}")
        for t, s in zip(self.parameters_of(target), self.parameters_of(source), strict=True):
            t.mul_(decay).add_(s.to(t.dtype), alpha=1.0 - decay)

    @contextmanager
    def use(self, name: str) -> Iterator[None]:
        """Run forwards with adapter ``name`` instead of the trained one; restores the previous adapter."""
        if name not in self.names:
            raise RuntimeFailure(f"no LoRA adapter named {name!r}", hint=f"existing: {list(self.names)}")
        previous = self._active
        self._activate(name)
        try:
            yield
        finally:
            self._activate(previous)

    @contextmanager
    def disabled(self) -> Iterator[None]:
        """The base model (every adapter off); nests, and restores on exit even when the body raises."""
        if self._disabled_depth == 0:
            self.transformer.disable_adapters()
        self._disabled_depth += 1
        try:
            yield
        finally:
            self._disabled_depth -= 1
            if self._disabled_depth == 0:
                self.transformer.enable_adapters()
                self._refreeze()

    # -- files -----------------------------------------------------------------------------------------------

    def _pipeline(self) -> Any:
        import diffusers

        return getattr(diffusers, self.pipeline_class)

    def save(self, directory: str | Path, *, name: str = TRAINED_ADAPTER) -> Path:
        """Write ``pytorch_lora_weights.safetensors`` in diffusers' LoRA format of :attr:`pipeline_class`, with the
        LoRA config as metadata so its ``load_lora_weights`` restores alpha as well as rank.

        With the transformer sharded by FSDP2 this is a collective (every worker calls it; the weights are
        gathered whole) and only rank 0 writes."""
        from peft.utils import get_peft_model_state_dict

        from omni_rl.engine.fsdp import gather_state

        directory = Path(directory)
        gathered = gather_state(get_peft_model_state_dict(self.transformer, adapter_name=name))
        if gathered is None:  # a rank > 0 of a sharded model: rank 0 writes
            return directory / LORA_WEIGHT_NAME
        state = gathered
        metadata = self.transformer.peft_config[name].to_dict()
        directory.mkdir(parents=True, exist_ok=True)
        self._pipeline().save_lora_weights(
            directory, transformer_lora_layers=state, transformer_lora_adapter_metadata=metadata
        )
        return directory / LORA_WEIGHT_NAME

    def load(self, directory: str | Path, *, name: str = TRAINED_ADAPTER) -> None:
        """Load transformer LoRA weights (diffusers format) into adapter ``name``; shapes and alpha must match."""
        from peft.utils import get_peft_model_state_dict, set_peft_model_state_dict

        try:
            # use_safetensors=True: never fall back to unpickling a .bin file found in the directory
            state, metadata = self._pipeline().lora_state_dict(
                str(directory), return_lora_metadata=True, use_safetensors=True
            )
        except (OSError, ValueError) as error:
            raise RuntimeFailure(
                f"cannot read LoRA weights from {directory}: {error}",
                hint=f"point at a directory holding {LORA_WEIGHT_NAME} written by save_lora",
            ) from error
        prefix = "transformer."
        loaded = {k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)}
        expected = get_peft_model_state_dict(self.transformer, adapter_name=name)
        self._check_compatible(directory, loaded, expected, metadata or {})
        with torch.no_grad():
            set_peft_model_state_dict(self.transformer, loaded, adapter_name=name)

    def _check_compatible(
        self, directory: str | Path, loaded: dict[str, Any], expected: dict[str, Any], metadata: dict[str, Any]
    ) -> None:
        hint = (
            "load LoRA weights written with the same lora_rank, lora_alpha and lora_target_modules "
            f"(this model: rank {self.config.lora_rank}, alpha {self.config.effective_lora_alpha:g}, "
            f"targets {list(self.config.lora_target_modules)})"
        )
        missing, extra = sorted(expected.keys() - loaded.keys()), sorted(loaded.keys() - expected.keys())
        if missing or extra:
            raise RuntimeFailure(
                f"LoRA weights in {directory} target other modules ({len(missing)} missing, {len(extra)} "
                f"unexpected, e.g. {(missing or extra)[0]!r})",
                hint=hint,
            )
        for key, value in expected.items():
            if tuple(loaded[key].shape) != tuple(value.shape):
                raise RuntimeFailure(
                    f"LoRA weight {key!r} in {directory} has shape {tuple(loaded[key].shape)}, "
                    f"expected {tuple(value.shape)}",
                    hint=hint,
                )
        alpha = metadata.get("transformer.lora_alpha", metadata.get("lora_alpha"))
        if alpha is not None and float(alpha) != self.config.effective_lora_alpha:
            raise RuntimeFailure(f"LoRA in {directory} was trained with lora_alpha = {alpha}", hint=hint)

    # -- internals -------------------------------------------------------------------------------------------

    def _inject(self, name: str) -> None:
        device = next(self.transformer.parameters()).device
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), warnings.catch_warnings():
                torch.manual_seed(self.seed + len(getattr(self.transformer, "peft_config", None) or {}))
                # peft warns on every adapter after the first; several adapters are the point here.
                warnings.filterwarnings("ignore", message="Already found a `peft_config`", category=UserWarning)
                self.transformer.add_adapter(make_lora_config(self.config), adapter_name=name)
        except ValueError as error:
            raise ConfigError(
                f"cannot add LoRA to the {self.model_label} transformer: {error}", hint=self.target_hint
            ) from error
        # Trainable LoRA weights stay float32 under a bfloat16 base model: peft casts activations to the adapter
        # dtype and the result back, and optimizer updates of ~1e-6 relative size survive.
        for param in self.parameters_of(name):
            param.data = param.data.float()
        self._activate(self._active)  # add_adapter activates the new adapter; keep the current one

    def _activate(self, name: str) -> None:
        self.transformer.set_adapter(name)
        self._active = name
        self._refreeze()

    def _refreeze(self) -> None:
        trained = {id(p) for p in self.parameters_of(TRAINED_ADAPTER)}
        for pname, param in self.transformer.named_parameters():
            if "lora_" in pname:
                param.requires_grad_(id(param) in trained)
