"""LoRA through peft: diffusers-format export that the plain pipeline reloads, views, extra adapters."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omni_rl_sd3.config import SD3Config
from omni_rl_sd3.model import SD3Model

from omni_rl.context import BuildContext
from omni_rl.errors import RuntimeFailure

PROMPT = "a blue square on a green sign"


def _perturb(params: list[torch.nn.Parameter], seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in params:
            p.add_(0.3 * torch.randn(p.shape, generator=generator))


@pytest.fixture(scope="module")
def trained(tiny_sd3_path: Path) -> SD3Model:
    """A model whose LoRA (rank 4, alpha 8: scale 2) moved away from zero, as after training."""
    model = SD3Model(SD3Config(path=str(tiny_sd3_path), lora_rank=4, lora_alpha=8), BuildContext())
    _perturb(model.trainable_parameters(), seed=0)
    return model


def test_export_reloads_into_a_plain_pipeline(trained, tiny_sd3_path, tmp_path, sampling, base_pipe) -> None:
    from diffusers import StableDiffusion3Pipeline

    euler_sample, pipe_sample = sampling
    trained.save_lora(tmp_path)
    assert (tmp_path / "pytorch_lora_weights.safetensors").is_file()
    pipe = StableDiffusion3Pipeline.from_pretrained(tiny_sd3_path)
    pipe.set_progress_bar_config(disable=True)
    pipe.load_lora_weights(tmp_path)
    latents, images = euler_sample(trained, PROMPT, steps=2, guidance=4.5, seed=3)
    ref_latents, ref_images = pipe_sample(pipe, PROMPT, steps=2, guidance=4.5, seed=3)
    torch.testing.assert_close(latents, ref_latents, rtol=1e-5, atol=1e-5)
    assert (images.int() - ref_images.int()).abs().max() <= 1
    base_latents, _ = pipe_sample(base_pipe, PROMPT, steps=2, guidance=4.5, seed=3)
    assert (latents - base_latents).abs().max() > 1e-2  # the LoRA really changes the policy


def test_load_lora_restores_the_policy(trained, tiny_sd3_path, tmp_path) -> None:
    trained.save_lora(tmp_path)
    fresh = SD3Model(SD3Config(path=str(tiny_sd3_path), lora_rank=4, lora_alpha=8), BuildContext())
    fresh.load_lora(tmp_path)
    for mine, theirs in zip(trained.trainable_parameters(), fresh.trainable_parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    assert all(p.requires_grad for p in fresh.trainable_parameters())
    mismatched = SD3Model(SD3Config(path=str(tiny_sd3_path), lora_rank=4), BuildContext())  # alpha 4, not 8
    with pytest.raises(RuntimeFailure, match="lora_alpha") as error:
        mismatched.load_lora(tmp_path)
    assert "lora_rank" in error.value.hint


def test_load_lora_never_unpickles_a_bin_file(trained, tiny_sd3_path, tmp_path) -> None:
    from safetensors.torch import load_file

    trained.save_lora(tmp_path)
    weights = tmp_path / "pytorch_lora_weights.safetensors"
    torch.save(load_file(str(weights)), tmp_path / "pytorch_lora_weights.bin")  # the same weights, pickled
    weights.unlink()
    fresh = SD3Model(SD3Config(path=str(tiny_sd3_path), lora_rank=4, lora_alpha=8), BuildContext())
    with pytest.raises(RuntimeFailure, match="cannot read LoRA weights"):
        fresh.load_lora(tmp_path)


def test_disable_adapters_is_the_base_model(trained, base_pipe, sampling) -> None:
    euler_sample, pipe_sample = sampling
    base_latents, _ = pipe_sample(base_pipe, PROMPT, steps=2, guidance=4.5, seed=5)
    policy_latents, _ = euler_sample(trained, PROMPT, steps=2, guidance=4.5, seed=5)
    with trained.disable_adapters():
        with trained.disable_adapters():  # nesting keeps the outer view
            pass
        reference_latents, _ = euler_sample(trained, PROMPT, steps=2, guidance=4.5, seed=5)
    torch.testing.assert_close(reference_latents, base_latents, rtol=0, atol=1e-5)
    with pytest.raises(ZeroDivisionError), trained.disable_adapters():
        _ = 1 / 0
    after, _ = euler_sample(trained, PROMPT, steps=2, guidance=4.5, seed=5)
    torch.testing.assert_close(after, policy_latents, rtol=0, atol=0)
    assert all(p.requires_grad for p in trained.trainable_parameters())


def test_old_adapter_trails_the_trained_one(tiny_sd3_path) -> None:
    model = SD3Model(SD3Config(path=str(tiny_sd3_path), lora_rank=2), BuildContext())
    trained = model.trainable_parameters()
    _perturb(trained, seed=1)
    model.add_adapter("old")  # a frozen copy of "default"
    conditioning = model.encode_prompts(["a"], guidance_scale=1.0)
    x = torch.randn(1, 16, 8, 8, generator=torch.Generator().manual_seed(2))
    sigma = torch.tensor([0.7])

    def velocity() -> torch.Tensor:
        return model.predict_velocity(x, sigma, conditioning, 1.0)

    snapshot = velocity()
    _perturb(trained, seed=2)  # a training step
    moved = velocity()
    with model.use_adapter("old"):
        torch.testing.assert_close(velocity(), snapshot, rtol=0, atol=0)
    torch.testing.assert_close(velocity(), moved, rtol=0, atol=0)
    assert model.trainable_parameters() == trained and all(p.requires_grad for p in trained)
    old = model.adapters.parameters_of("old")
    assert old and not any(p.requires_grad for p in old)
    model.blend_adapter("old", decay=0.0)  # old <- default
    with model.use_adapter("old"):
        torch.testing.assert_close(velocity(), moved, rtol=0, atol=0)
    with pytest.raises(RuntimeFailure, match="no LoRA adapter named"), model.use_adapter("older"):
        pass


def test_full_fine_tuning(tiny_sd3_path, tmp_path) -> None:
    model = SD3Model(SD3Config(path=str(tiny_sd3_path), lora_rank=0), BuildContext())
    params = model.trainable_parameters()
    assert len(params) == len(list(model.transformer.parameters())) and all(p.requires_grad for p in params)
    with pytest.raises(RuntimeFailure) as error, model.disable_adapters():
        pass
    assert "lora_rank" in error.value.hint
    _perturb(params[:3], seed=3)
    model.save_lora(tmp_path)
    fresh = SD3Model(SD3Config(path=str(tiny_sd3_path), lora_rank=0), BuildContext())
    fresh.load_lora(tmp_path)
    torch.testing.assert_close(fresh.trainable_parameters()[0], params[0], rtol=0, atol=0)


def test_lora_init_is_seeded_by_the_run(tiny_sd3_path) -> None:
    """Every worker builds the same initial LoRA from the run seed, and the global RNG is left alone."""
    state = torch.random.get_rng_state()
    a = SD3Model(SD3Config(path=str(tiny_sd3_path), lora_rank=2), BuildContext(seed=5))
    b = SD3Model(SD3Config(path=str(tiny_sd3_path), lora_rank=2), BuildContext(seed=5, rank=1, world_size=2))
    assert torch.equal(torch.random.get_rng_state(), state)
    for p, q in zip(a.trainable_parameters(), b.trainable_parameters(), strict=True):
        assert torch.equal(p, q)
    assert any(p.abs().sum() > 0 for p in a.trainable_parameters())  # A is random, B is zero
