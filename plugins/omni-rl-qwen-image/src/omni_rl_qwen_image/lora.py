"""LoRA adapters on the Qwen-Image transformer through peft: the trained adapter, extra named ones, their views.

RL fine-tuning evaluates up to three policies from one set of base weights: the current policy (the trained
adapter, ``"default"``), the reference (adapters off) and, for DiffusionNFT/AWM, an ``"old"``/``"ema"`` policy kept
as another adapter. This class owns that state so the invariants hold whatever view ran last: only the trained
adapter requires grad (peft re-enables ``requires_grad`` on whatever adapter it activates, so every switch
re-asserts ours), LoRA weights are float32 over a bf16 base, and every view restores the previous one on exit.

Files are diffusers' Qwen-Image LoRA format (``transformer.``-prefixed peft keys in
``pytorch_lora_weights.safetensors``, the LoRA config as metadata), which ``QwenImagePipeline.load_lora_weights``
reads.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl_qwen_image.config import QwenImageConfig

TRAINED_ADAPTER = "default"
LORA_WEIGHT_NAME = "pytorch_lora_weights.safetensors"
_PREFIX = "transformer."


def make_lora_config(config: QwenImageConfig) -> Any:
    """The peft ``LoraConfig`` for ``config`` (B starts at zero, so the policy starts at the base model)."""
    from peft import LoraConfig

    return LoraConfig(
        r=config.lora_rank,
        lora_alpha=config.effective_lora_alpha,
        target_modules=list(config.lora_target_modules),
        init_lora_weights=True if config.lora_init == "default" else "gaussian",
        lora_dropout=0.0,  # dropout would make the recomputed log-probs differ from the rollout's
    )


class QwenLoraAdapters:
    """Named LoRA adapters injected into one transformer; ``"default"`` is the one the optimizer trains."""

    def __init__(self, transformer: torch.nn.Module, config: QwenImageConfig, *, seed: int = 0) -> None:
        self.transformer = transformer
        self.config = config
        #: seeds LoRA A's random init, so every worker starts from the same weights without a broadcast
        self.seed = seed
        self._disabled_depth = 0
        self._active = TRAINED_ADAPTER
        self._inject(TRAINED_ADAPTER)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.transformer.peft_config)

    def trained_parameters(self) -> list[torch.nn.Parameter]:
        # looked up each time: FSDP2 replaces the parameters with shards
        return self.parameters_of(TRAINED_ADAPTER)

    def parameters_of(self, name: str) -> list[torch.nn.Parameter]:
        """The LoRA weights of adapter ``name``, in module order."""
        marker = f".{name}."
        return [p for n, p in self.transformer.named_parameters() if "lora_" in n and marker in n]

    def add(self, name: str, *, copy_from: str | None = TRAINED_ADAPTER) -> None:
        """Inject another adapter with the trained one's config (frozen), optionally a copy of ``copy_from``."""
        if name in self.names:
            raise RuntimeFailure(f"LoRA adapter {name!r} already exists", hint=f"existing: {list(self.names)}")
        self._inject(name)
        if copy_from is not None:
            self.blend(name, copy_from, decay=0.0)

    @torch.no_grad()
    def blend(self, target: str, source: str, *, decay: float) -> None:
        """``target <- decay * target + (1 - decay) * source``, weight by weight (decay 0 copies)."""
        self._require(target, source)
        for t, s in zip(self.parameters_of(target), self.parameters_of(source), strict=True):
            t.mul_(decay).add_(s.to(t.dtype), alpha=1.0 - decay)

    @contextmanager
    def use(self, name: str) -> Iterator[None]:
        """Forwards run with adapter ``name`` instead of the trained one; the previous adapter comes back."""
        self._require(name)
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

    def save(self, directory: str | Path, *, name: str = TRAINED_ADAPTER) -> Path:
        """Write ``pytorch_lora_weights.safetensors`` for ``QwenImagePipeline.load_lora_weights`` (alpha travels
        in the metadata). A collective under FSDP2: the weights are gathered whole and rank 0 writes."""
        from diffusers import QwenImagePipeline
        from peft.utils import get_peft_model_state_dict

        from omni_rl.runtime.fsdp import gather_state

        directory = Path(directory)
        state = gather_state(get_peft_model_state_dict(self.transformer, adapter_name=name))
        if state is None:  # a rank > 0 of a sharded model
            return directory / LORA_WEIGHT_NAME
        directory.mkdir(parents=True, exist_ok=True)
        QwenImagePipeline.save_lora_weights(
            directory,
            transformer_lora_layers=state,
            transformer_lora_adapter_metadata=self.transformer.peft_config[name].to_dict(),
        )
        return directory / LORA_WEIGHT_NAME

    def load(self, directory: str | Path, *, name: str = TRAINED_ADAPTER) -> None:
        """Load LoRA weights (diffusers Qwen-Image format) into adapter ``name``; targets, shapes, alpha must match."""
        from diffusers import QwenImagePipeline
        from peft.utils import get_peft_model_state_dict, set_peft_model_state_dict

        try:
            state, metadata = QwenImagePipeline.lora_state_dict(
                str(directory), return_lora_metadata=True, use_safetensors=True
            )
        except (OSError, ValueError) as error:
            raise RuntimeFailure(
                f"cannot read LoRA weights from {directory}: {error}",
                hint=f"point at a directory holding {LORA_WEIGHT_NAME} written by save_lora",
            ) from error
        loaded = {k.removeprefix(_PREFIX): v for k, v in state.items() if k.startswith(_PREFIX)}
        expected = get_peft_model_state_dict(self.transformer, adapter_name=name)
        self._check_compatible(directory, loaded, expected, metadata or {})
        with torch.no_grad():
            set_peft_model_state_dict(self.transformer, loaded, adapter_name=name)

    def _check_compatible(
        self, directory: str | Path, loaded: dict[str, Any], expected: dict[str, Any], metadata: dict[str, Any]
    ) -> None:
        hint = (
            "load LoRA weights written with the same lora_rank, lora_alpha and lora_target_modules "
            f"(this model: rank {self.config.lora_rank}, alpha {self.config.effective_lora_alpha:g})"
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

    def _require(self, *names: str) -> None:
        for name in names:
            if name not in self.names:
                raise RuntimeFailure(f"no LoRA adapter named {name!r}", hint=f"existing: {list(self.names)}")

    def _inject(self, name: str) -> None:
        device = next(self.transformer.parameters()).device
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), warnings.catch_warnings():
                torch.manual_seed(self.seed + len(getattr(self.transformer, "peft_config", None) or {}))
                warnings.filterwarnings("ignore", message="Already found a `peft_config`", category=UserWarning)
                self.transformer.add_adapter(make_lora_config(self.config), adapter_name=name)
        except ValueError as error:
            raise ConfigError(
                f"cannot add LoRA to the Qwen-Image transformer: {error}",
                hint="lora_target_modules are dotted-name suffixes of transformer modules, e.g. 'attn.to_q', "
                "'attn.add_q_proj', 'img_mlp.net.2', 'img_mod.1'",
            ) from error
        # float32 LoRA over a bf16 base: peft casts activations to the adapter dtype and back, and optimizer
        # updates of ~1e-6 relative size survive
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
