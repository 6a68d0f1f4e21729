"""The shared speed options of the diffusers model adapters (omni_rl_pipelines.speed), on the tiny SD3, FLUX and
Qwen-Image pipelines: off by default and bit-identical to a model built without them; a fused attention kernel
is refused on the CPU with the reason; VAE tiling/slicing and the "math" kernel turn on; regional compilation
compiles every block, recomputes the old log-probs through the trained forward so the first step's ratio is
exactly 1, and is refused where the old log-probs would not be recomputed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omni_rl_pipelines.testing import first_update_ratio

from omni_rl import build, load_config
from omni_rl.errors import ConfigError
from omni_rl.protocols import RolloutRequest

PROMPTS = ["a red circle", "a red circle", "two blue squares", "two blue squares"]
GROUPS = [0, 0, 1, 1]
ROLLOUT = {"group_size": 2, "steps": 3, "eval_steps": 3, "height": 32, "width": 32, "cfg": 1.0, "batch_size": 4}
OFF = {
    "compile": "off",
    "attention_backend": "default",
    "vae_tiling": False,
    "vae_slicing": False,
    "vae_channels_last": False,
    "cuda_graphs": False,
}
EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"


def _request() -> RolloutRequest:
    return RolloutRequest(prompts=PROMPTS, group_ids=GROUPS, seeds=[3, 4, 5, 6], step=1, mode="train")


@pytest.fixture(scope="module")
def sampler():
    return build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 2], "window_mode": "fixed"})


@pytest.fixture(params=["sd3", "flux", "qwen_image"])
def pipeline(request: pytest.FixtureRequest) -> tuple[str, Path]:
    fixture = {"sd3": "tiny_sd3", "flux": "tiny_flux", "qwen_image": "tiny_qwen_image"}[request.param]
    return request.param, request.getfixturevalue(fixture)


def _model(pipeline: tuple[str, Path], **options: object):
    name, path = pipeline
    return build("model", name, {"path": str(path), "lora_rank": 4, **options})


def test_speed_options_off_change_no_bit(pipeline: tuple[str, Path], sampler) -> None:
    default, explicit = _model(pipeline), _model(pipeline, **OFF)
    for model in (default, explicit):
        assert not model.config.compiled and not model.old_log_probs_with_grad and model.graphs is None
        assert not getattr(model.vae, "use_tiling", False) and not getattr(model.vae, "use_slicing", False)
    rollout = build("rollout", "diffusers", ROLLOUT)
    a = rollout.generate(default, sampler, _request())
    b = rollout.generate(explicit, sampler, _request())
    assert torch.equal(a.images, b.images)
    assert torch.equal(a.trajectory.log_probs, b.trajectory.log_probs)


@pytest.mark.parametrize("backend", ["flash", "cudnn", "efficient"])
def test_fused_attention_is_refused_on_the_cpu(tiny_sd3: Path, backend: str) -> None:
    with pytest.raises(ConfigError, match=f'attention_backend = "{backend}" needs a CUDA GPU') as error:
        _model(("sd3", tiny_sd3), attention_backend=backend)
    assert "default" in (error.value.hint or "")


def test_math_attention_and_vae_options_run(tiny_sd3: Path, sampler) -> None:
    base = _model(("sd3", tiny_sd3))
    fast = _model(("sd3", tiny_sd3), attention_backend="math", vae_slicing=True, vae_tiling=True)
    assert fast.vae.use_slicing and fast.vae.use_tiling
    rollout = build("rollout", "diffusers", ROLLOUT)
    a = rollout.generate(base, sampler, _request())
    b = rollout.generate(fast, sampler, _request())
    torch.testing.assert_close(b.final_latents, a.final_latents, atol=1e-4, rtol=1e-4)
    assert (b.images.int() - a.images.int()).abs().max() <= 2  # 32 px: under the tile size, slicing only


def _conv_weights(vae: torch.nn.Module) -> list[torch.Tensor]:
    return [p for p in vae.parameters() if p.dim() in (4, 5)]


@pytest.mark.parametrize("name", ["sd3", "qwen_image"])
def test_channels_last_vae_decodes_the_same_images(name: str, sampler, request: pytest.FixtureRequest) -> None:
    """SD3's 2-D and Qwen-Image's 3-D convolutions: the weights change layout, the images stay the same."""
    path = request.getfixturevalue({"sd3": "tiny_sd3", "qwen_image": "tiny_qwen_image"}[name])
    base, fast = _model((name, path)), _model((name, path), vae_channels_last=True)
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}
    assert all(not w.is_contiguous(memory_format=formats[w.dim()]) for w in _conv_weights(base.vae) if w.shape[-1] > 1)
    assert all(w.is_contiguous(memory_format=formats[w.dim()]) for w in _conv_weights(fast.vae))
    rollout = build("rollout", "diffusers", ROLLOUT)
    a = rollout.generate(base, sampler, _request())
    b = rollout.generate(fast, sampler, _request())
    assert torch.equal(a.final_latents, b.final_latents)  # the transformer is untouched
    assert (b.images.int() - a.images.int()).abs().max() <= 1  # float rounding of another summation order


def test_bad_values_name_the_path(tiny_sd3: Path) -> None:
    with pytest.raises(ConfigError, match=r"@ \$\.model\.options\.attention_backend"):
        _model(("sd3", tiny_sd3), attention_backend="fast")
    with pytest.raises(ConfigError, match=r"@ \$\.model\.options\.compile"):
        _model(("sd3", tiny_sd3), compile="full")


@pytest.mark.parametrize(
    "sets", [["optim.recompute_old_log_probs=false"], ['rollout_correction.mode="bypass"']], ids=["reuse", "bypass"]
)
def test_compile_without_a_recompute_is_refused(tiny_sd3: Path, sets: list[str]) -> None:
    with pytest.raises(ConfigError, match=r"recomputed through the trained forward.*@ \$\.model\.options\.compile"):
        load_config(EXAMPLE, [f"model.options.path={tiny_sd3}", 'model.options.compile="regional"', *sets])


@pytest.mark.slow
def test_regional_compile_keeps_the_first_ratio_at_one(tiny_sd3: Path, sampler) -> None:
    """Every block compiled in place; the old log-probs recomputed through the trained (grad) forward equal what
    the update's first forward computes, so exp(new - old) is exactly 1 before any optimizer step."""
    model = _model(("sd3", tiny_sd3), compile="regional")
    blocks = model.transformer.transformer_blocks
    assert all(getattr(block, "_compiled_call_impl", None) is not None for block in blocks)
    assert model.old_log_probs_with_grad
    batch = build("rollout", "diffusers", ROLLOUT).generate(model, sampler, _request())
    ratio, old = first_update_ratio(model, sampler, batch)
    assert ratio == 1.0
    torch.testing.assert_close(old, batch.trajectory.log_probs.float(), atol=1e-4, rtol=0)
