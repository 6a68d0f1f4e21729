"""LoraAdapters on a diffusers transformer (a small SD3 one, built here): seeded init, only the trained adapter
trains, every view restores the previous one, the files round-trip, and a merged copy is the LoRA-on policy."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from omni_rl_pipelines.lora import TRAINED_ADAPTER, LoraAdapters, merged_copy

from omni_rl.errors import ConfigError, RuntimeFailure


class Adapters(LoraAdapters):
    pipeline_class = "StableDiffusion3Pipeline"
    model_label = "Toy"


def _transformer() -> torch.nn.Module:
    from diffusers import SD3Transformer2DModel

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return SD3Transformer2DModel(
            sample_size=8, patch_size=2, in_channels=4, out_channels=4, num_layers=1, attention_head_dim=8,
            num_attention_heads=2, joint_attention_dim=16, caption_projection_dim=16, pooled_projection_dim=8,
            pos_embed_max_size=8,
        ).eval()  # fmt: skip


def _options(**changes: object) -> SimpleNamespace:
    options = {"lora_rank": 4, "effective_lora_alpha": 8.0, "lora_target_modules": ("attn.to_q", "attn.to_v")}
    return SimpleNamespace(**{**options, "lora_init": "gaussian", **changes})


def _forward(transformer: torch.nn.Module) -> torch.Tensor:
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        return transformer(
            hidden_states=torch.randn(1, 4, 8, 8, generator=generator),
            encoder_hidden_states=torch.randn(1, 3, 16, generator=generator),
            pooled_projections=torch.randn(1, 8, generator=generator),
            timestep=torch.tensor([500.0]),
            return_dict=False,
        )[0]


def _perturb(params: list[torch.nn.Parameter], seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in params:
            p.add_(0.3 * torch.randn(p.shape, generator=generator))


def test_the_init_is_seeded_and_starts_at_the_base_model() -> None:
    base = _forward(_transformer())
    first, second = Adapters(_transformer(), _options(), seed=3), Adapters(_transformer(), _options(), seed=3)
    for a, b in zip(first.trained_parameters(), second.trained_parameters(), strict=True):
        assert torch.equal(a, b) and a.dtype == torch.float32 and a.requires_grad
    torch.testing.assert_close(_forward(first.transformer), base, rtol=0, atol=0)  # B = 0: the base policy
    other = Adapters(_transformer(), _options(), seed=4)
    pairs = zip(first.trained_parameters(), other.trained_parameters(), strict=True)
    assert not all(torch.equal(a, b) for a, b in pairs)


def test_views_restore_the_trained_adapter_and_only_it_trains() -> None:
    adapters = Adapters(_transformer(), _options())
    base = _forward(adapters.transformer)
    _perturb(adapters.trained_parameters(), seed=0)
    trained = _forward(adapters.transformer)
    assert not torch.allclose(trained, base)
    with adapters.disabled(), adapters.disabled():  # nests
        torch.testing.assert_close(_forward(adapters.transformer), base)
    torch.testing.assert_close(_forward(adapters.transformer), trained)
    adapters.add("old")
    assert adapters.names == (TRAINED_ADAPTER, "old") and adapters.active == TRAINED_ADAPTER
    _perturb(adapters.trained_parameters(), seed=1)
    with adapters.use("old"):
        torch.testing.assert_close(_forward(adapters.transformer), trained)  # the copy made before the step
    assert all(not p.requires_grad for p in adapters.parameters_of("old"))
    assert all(p.requires_grad for p in adapters.trained_parameters())
    adapters.blend("old", TRAINED_ADAPTER, decay=0.0)
    for old, new in zip(adapters.parameters_of("old"), adapters.trained_parameters(), strict=True):
        assert torch.equal(old, new)
    with pytest.raises(RuntimeFailure, match="no LoRA adapter named"), adapters.use("older"):
        pass


def test_files_round_trip_and_refuse_another_alpha(tmp_path: Path) -> None:
    adapters = Adapters(_transformer(), _options())
    _perturb(adapters.trained_parameters(), seed=2)
    saved = _forward(adapters.transformer)
    assert adapters.save(tmp_path).name == "pytorch_lora_weights.safetensors"
    fresh = Adapters(_transformer(), _options())
    fresh.load(tmp_path)
    torch.testing.assert_close(_forward(fresh.transformer), saved)
    with pytest.raises(RuntimeFailure, match="lora_alpha"):
        Adapters(_transformer(), _options(effective_lora_alpha=4.0)).load(tmp_path)


def test_a_merged_copy_is_the_lora_on_policy_without_adapters() -> None:
    adapters = Adapters(_transformer(), _options())
    _perturb(adapters.trained_parameters(), seed=3)
    adapters.add("old")
    merged = merged_copy(adapters.transformer)
    assert not getattr(merged, "peft_config", None) and not any(p.requires_grad for p in merged.parameters())
    torch.testing.assert_close(_forward(merged), _forward(adapters.transformer), rtol=1e-5, atol=1e-6)
    assert adapters.names == (TRAINED_ADAPTER, "old")  # the model keeps its adapters


def test_a_target_that_matches_nothing_is_a_config_error_with_the_hint() -> None:
    with pytest.raises(ConfigError, match="cannot add LoRA to the Toy transformer") as error:
        Adapters(_transformer(), _options(lora_target_modules=("no_such_module",)))
    assert "dotted-name suffixes" in (error.value.hint or "")
