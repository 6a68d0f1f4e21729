"""`pretrain --arch qwen_image`: the shapes recipe on a tiny Qwen-Image pipeline, end to end (~15 s on one core).

The run uses a very small Qwen-Image shape and a two-step, one-image-per-prompt evaluation so it stays quick; what
it checks is what the shipped Qwen-Image model will rely on: the directory loads with diffusers alone and as
omni-rl's ``qwen_image`` model by path, the evaluation's sampler draws what ``QwenImagePipeline.__call__`` draws,
and the training sigmas follow the Qwen-Image scheduler's dynamic shift. omni-rl-shapes does not depend on
omni-rl-qwen-image, so these tests skip without it, and its absence is a usage error, not a traceback."""

from __future__ import annotations

import functools
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omni_rl_shapes.evaluate import RECORD_FILE, SamplingSettings
from omni_rl_shapes.pretraining import pretrain
from omni_rl_shapes.pretraining.pretrain import parse_args


def _small_shape() -> Any:
    from omni_rl_qwen_image.tiny import TinyQwenImageShape

    return TinyQwenImageShape(
        num_layers=1,
        num_attention_heads=2,
        attention_head_dim=16,
        axes_dims_rope=(4, 6, 6),
        vae_base_dim=8,
        vae_dim_mult=(1, 2),
        text_hidden_size=32,
        text_layers=1,
        text_heads=2,
        text_kv_heads=1,
    )


@pytest.fixture(scope="module")
def pretrained_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-step `--arch qwen_image` run of a very small shape (module-scoped: the run is the expensive part)."""
    pytest.importorskip("omni_rl_qwen_image")
    import torch
    from omni_rl_shapes.pretraining.arch import QwenImageArchitecture

    out = tmp_path_factory.mktemp("qwen") / "stage"
    argv = ["--arch", "qwen_image", "--out", str(out), "--seed", "5", "--steps", "2", "--vae-steps", "2"]
    argv += ["--images-per-prompt", "1", "--eval-from", "2", "--eval-every", "2", "--target-low", "0"]
    argv += ["--target-high", "1"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.setattr(pretrain, "architecture", lambda name: QwenImageArchitecture(shape=_small_shape()))
        quick = functools.partial(SamplingSettings, num_inference_steps=2, images_per_prompt=1)
        patch.setattr(pretrain, "SamplingSettings", quick)
        threads = torch.get_num_threads()
        try:
            assert pretrain.main(argv) == 0
        finally:
            torch.set_num_threads(threads)  # main sets its own (--threads 1) for the whole process
    return out


def test_the_run_records_the_architecture_and_its_calibrated_vae(pretrained_qwen: Path) -> None:
    import attrs

    record = json.loads((pretrained_qwen / RECORD_FILE).read_text())
    assert record["arch"] == "qwen_image"
    assert record["model"] == json.loads(json.dumps(attrs.asdict(_small_shape())))
    assert record["image_size"] == 32 and record["transformer"]["steps"] == 2
    assert record["save_dtype"] == "float32"
    assert 0.0 <= record["val"]["score"] <= 1.0
    vae_config = json.loads((pretrained_qwen / "vae" / "config.json").read_text())
    # the per-channel statistics the run measured are the ones the saved VAE standardises latents with
    assert vae_config["latents_mean"] == pytest.approx(record["vae"]["latents_mean"])
    assert vae_config["latents_std"] == pytest.approx(record["vae"]["latents_std"])
    assert len(record["vae"]["latents_std"]) == 16 and min(record["vae"]["latents_std"]) > 0
    marker = json.loads((pretrained_qwen / "omni_rl_tiny.json").read_text())
    assert marker["random_weights"] is False and marker["record"] == RECORD_FILE
    assert not list(pretrained_qwen.parent.glob(".stage.*"))  # the staging directory is gone


def test_float16_saving_halves_the_weights_and_loads_back_exactly_upcast(pretrained_qwen: Path, tmp_path: Path) -> None:
    """``--save-dtype float16`` (what the shipped Qwen-Image model uses to fit the package's 20 MB): the files hold
    float16 tensors, and the model plugins' float32 loading gives the float16-rounded weights back exactly."""
    import torch
    from diffusers import AutoencoderKLQwenImage, QwenImageTransformer2DModel
    from omni_rl_shapes.pretraining.arch import save_trained
    from safetensors import safe_open

    transformer = QwenImageTransformer2DModel.from_pretrained(pretrained_qwen / "transformer")
    vae = AutoencoderKLQwenImage.from_pretrained(pretrained_qwen / "vae")
    expected = {k: v.to(torch.float16).float() for k, v in transformer.state_dict().items()}
    save_trained(transformer, vae, tmp_path, torch.float16)
    for part in ("transformer", "vae"):
        with safe_open(str(tmp_path / part / "diffusion_pytorch_model.safetensors"), "pt") as weights:
            assert {weights.get_tensor(k).dtype for k in weights.keys()} == {torch.float16}  # noqa: SIM118 (not a dict)
    saved = (tmp_path / "transformer" / "diffusion_pytorch_model.safetensors").stat().st_size
    full = (pretrained_qwen / "transformer" / "diffusion_pytorch_model.safetensors").stat().st_size
    assert saved < 0.6 * full
    loaded = QwenImageTransformer2DModel.from_pretrained(tmp_path / "transformer", torch_dtype=torch.float32)
    for key, value in loaded.state_dict().items():
        assert value.dtype == torch.float32 and torch.equal(value, expected[key]), key


def test_the_directory_loads_in_diffusers_and_as_the_qwen_image_model_and_samples_alike(pretrained_qwen: Path) -> None:
    """The evaluation's sampler (omni-rl's model, Euler over its schedule, true CFG with " ") draws the images
    ``QwenImagePipeline.__call__`` draws for the same seeds: the val numbers are the pipeline's numbers."""
    import torch
    from diffusers import QwenImagePipeline
    from omni_rl_shapes.evaluate import sample_model
    from omni_rl_shapes.pretraining.arch import QwenImageArchitecture

    settings = SamplingSettings(num_inference_steps=3, images_per_prompt=1, seed_offset=11)
    prompts = ["a red circle", "two blue squares left of a yellow triangle"]
    model = QwenImageArchitecture(shape=_small_shape()).load(pretrained_qwen, settings)
    assert type(model).__name__ == "QwenImageModel" and model.adapters is None  # full fine-tuning, as trained
    _, ours = sample_model(model, prompts, settings)

    pipe = QwenImagePipeline.from_pretrained(pretrained_qwen)
    pipe.set_progress_bar_config(disable=True)
    theirs = pipe(
        prompt=prompts,
        negative_prompt=[" "] * len(prompts),
        true_cfg_scale=settings.guidance_scale,
        num_inference_steps=settings.num_inference_steps,
        height=settings.size,
        width=settings.size,
        max_sequence_length=settings.max_sequence_length,
        generator=[torch.Generator().manual_seed(settings.seed_offset + i) for i in range(len(prompts))],
        output_type="np",
    ).images
    theirs = np.clip(np.rint(theirs * 255), 0, 255).astype(np.uint8)
    assert ours.shape == theirs.shape == (2, 32, 32, 3)
    assert np.abs(ours.astype(int) - theirs.astype(int)).max() <= 1


def test_training_sigmas_follow_the_qwen_image_schedulers_dynamic_shift(pretrained_qwen: Path) -> None:
    """exp(mu) in SD3's shift map is the Qwen-Image scheduler's exponential time shift at 64 image tokens."""
    import torch
    from diffusers import FlowMatchEulerDiscreteScheduler
    from diffusers.pipelines.qwenimage.pipeline_qwenimage import calculate_shift
    from omni_rl_shapes.pretraining.arch import QwenImageArchitecture
    from omni_rl_shapes.pretraining.flow_matching import FlowTraining, sample_sigmas

    arch = QwenImageArchitecture(shape=_small_shape())
    model = arch.load(pretrained_qwen, SamplingSettings())
    shift = arch.shift(model)
    scheduler = FlowMatchEulerDiscreteScheduler.from_pretrained(pretrained_qwen / "scheduler")
    config = scheduler.config
    mu = calculate_shift(64, config.base_image_seq_len, config.max_image_seq_len, config.base_shift, config.max_shift)
    assert shift == pytest.approx(math.exp(mu)) and 1.5 < shift < 1.8  # far gentler than SD3's 3 at 64 tokens
    for t in (0.1, 0.5, 0.9):
        fixed = FlowTraining(logit_mean=math.log(t / (1 - t)), logit_std=0.0)
        sigma = float(sample_sigmas(1, fixed, shift, torch.Generator().manual_seed(0))[0])
        assert sigma == pytest.approx(float(scheduler.time_shift(mu, 1.0, torch.tensor(t))), rel=1e-5)


def test_sd3_stays_the_default_architecture() -> None:
    assert parse_args([]).arch == "sd3"
    assert parse_args(["--arch", "sd3"]).arch == "sd3"


def test_without_the_qwen_image_plugin_the_arch_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "omni_rl_qwen_image", None)  # import omni_rl_qwen_image now raises
    with pytest.raises(SystemExit) as exit_info:
        parse_args(["--arch", "qwen_image"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "--arch qwen_image needs the omni-rl-qwen-image plugin" in err
    assert "omni-rl-shapes[qwen-image]" in err


def test_continuing_a_pipeline_of_the_other_architecture_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("omni_rl_qwen_image")
    import omni_rl_shapes

    with pytest.raises(SystemExit):
        parse_args(["--arch", "qwen_image", "--init-from", str(omni_rl_shapes.pretrained_path())])
    assert "holds a StableDiffusion3Pipeline, but --arch qwen_image continues a QwenImagePipeline" in (
        capsys.readouterr().err
    )
