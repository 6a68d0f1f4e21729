"""`omni-rl export`: a run's LoRA in diffusers format, or the merged pipeline, without training anything.

The run directory is made by hand (resolved config + LoRA checkpoints written by the model's own save_lora), so
these tests take seconds; what they check is that diffusers, with no omni-rl code involved, reproduces the
policy the checkpoint holds.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import attrs
import pytest
import torch
from safetensors.torch import load_file

from omni_rl import BuildContext, load_config
from omni_rl.cli import main
from omni_rl.config import write_resolved
from omni_rl.rundir.export import EXPORT_INFO

PROMPT = "a red cube on a table"
LORA_FILE = "pytorch_lora_weights.safetensors"
SIZE = 32
STEPS = 3
CFG = 4.5


def _config_text(tiny_sd3: Path, prompts: Path, output_dir: Path) -> str:
    return f"""
[run]
steps = 3
seed = 0
output_dir = "{output_dir}"

[data]
train = "{prompts}"

[algorithm]
name = "flow_grpo"

[model]
name = "sd3"
options = {{ path = "{tiny_sd3}", lora_rank = 4, lora_alpha = 8 }}

[sampler]
name = "flow_sde"

[rollout]
name = "diffusers"
options = {{ height = {SIZE}, width = {SIZE} }}

[[reward]]
name = "jpeg_compressibility"
"""


def _perturb(model: Any, seed: int) -> None:
    """Move the LoRA away from zero (B starts at 0), as training would."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.trainable_parameters():
            param.add_(0.1 * torch.randn(param.shape, generator=generator))


@attrs.frozen
class Run:
    directory: Path
    #: the model of step 3 (the latest checkpoint), as it was saved
    policy: Any


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, tiny_sd3: Path) -> Run:
    """A run directory with checkpoints of steps 1 and 3 (different LoRAs) and no training."""
    root = tmp_path_factory.mktemp("export")
    prompts = root / "prompts.txt"
    prompts.write_text("a red cube on a table\na blue ball\n", encoding="utf-8")
    run_dir = root / "run"
    toml = root / "config.toml"
    toml.write_text(_config_text(tiny_sd3, prompts, run_dir), encoding="utf-8")
    config = load_config(toml)
    write_resolved(config, run_dir)
    policy = None
    for step, seed in ((1, 11), (3, 33)):
        policy = config.components["model"].build(BuildContext(seed=config.run.seed))
        _perturb(policy, seed)
        policy.save_lora(run_dir / "checkpoints" / f"step_{step}")
    return Run(directory=run_dir, policy=policy)


def _export(run_dir: Path, out: Path, *args: str) -> dict[str, Any]:
    assert main(["export", str(run_dir), "--out", str(out), *args]) == 0
    return json.loads((out / EXPORT_INFO).read_text(encoding="utf-8"))


def _pipeline_latents(pipe: Any, seed: int = 5) -> torch.Tensor:
    pipe.set_progress_bar_config(disable=True)
    return pipe(
        PROMPT,
        num_inference_steps=STEPS,
        guidance_scale=CFG,
        height=SIZE,
        width=SIZE,
        generator=torch.Generator().manual_seed(seed),
        output_type="latent",
    ).images


def _policy_latents(policy: Any, seed: int = 5) -> torch.Tensor:
    """The policy's own Euler ODE loop, started from the noise the pipeline draws for the same seed."""
    sigmas = policy.sigma_schedule(STEPS, SIZE, SIZE)
    x = torch.randn((1, *policy.latent_shape(SIZE, SIZE)), generator=torch.Generator().manual_seed(seed))
    conditioning = policy.encode_prompts([PROMPT], guidance_scale=CFG)
    with torch.no_grad():
        for i in range(STEPS):
            velocity = policy.predict_velocity(x, sigmas[i].reshape(1), conditioning, CFG)
            x = x + (sigmas[i + 1] - sigmas[i]) * velocity
    return x


def _same_tensors(a: Path, b: Path) -> bool:
    first, second = load_file(str(a)), load_file(str(b))
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def test_lora_export_loads_into_the_base_pipeline_and_reproduces_the_policy(
    run: Run, tiny_sd3: Path, tmp_path: Path
) -> None:
    from diffusers import StableDiffusion3Pipeline

    out = tmp_path / "lora"
    info = _export(run.directory, out)
    assert (info["step"], info["merged"], info["model"]) == (3, False, "sd3")  # the highest step by default
    assert _same_tensors(out / LORA_FILE, run.directory / "checkpoints" / "step_3" / LORA_FILE)

    pipe = StableDiffusion3Pipeline.from_pretrained(tiny_sd3)
    base = _pipeline_latents(pipe)
    pipe.load_lora_weights(out)

    # same inputs (the policy's own prompt embeddings): the policy's velocity and the exported LoRA's through
    # the pipeline's transformer
    x = torch.randn((2, *run.policy.latent_shape(SIZE, SIZE)), generator=torch.Generator().manual_seed(1))
    sigma = torch.tensor([0.7, 0.3])
    conditioning = run.policy.encode_prompts([PROMPT, "a blue ball"], guidance_scale=1.0)
    with torch.no_grad():
        ours = run.policy.predict_velocity(x, sigma, conditioning, 1.0)
        theirs = pipe.transformer(
            hidden_states=x,
            timestep=sigma * 1000,
            encoder_hidden_states=conditioning.tensors["prompt_embeds"],
            pooled_projections=conditioning.tensors["pooled_prompt_embeds"],
        ).sample
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-5)

    tuned = _pipeline_latents(pipe)
    torch.testing.assert_close(_policy_latents(run.policy), tuned, rtol=0, atol=1e-5)
    assert (tuned - base).abs().max() > 1e-2  # the LoRA really changes the model


def test_merged_export_is_a_plain_pipeline_equal_to_base_plus_lora(run: Run, tiny_sd3: Path, tmp_path: Path) -> None:
    from diffusers import DiffusionPipeline, StableDiffusion3Pipeline

    out = tmp_path / "merged"
    info = _export(run.directory, out, "--merged")
    assert (info["step"], info["merged"]) == (3, True)
    assert not (out / LORA_FILE).exists()
    saved = load_file(str(out / "transformer" / "diffusion_pytorch_model.safetensors"))
    assert not [key for key in saved if "lora" in key]

    merged = DiffusionPipeline.from_pretrained(out)
    assert type(merged).__name__ == "StableDiffusion3Pipeline"
    assert not getattr(merged.transformer, "peft_config", None)
    reference = StableDiffusion3Pipeline.from_pretrained(tiny_sd3)
    reference.load_lora_weights(run.directory / "checkpoints" / "step_3")
    torch.testing.assert_close(_pipeline_latents(merged), _pipeline_latents(reference), rtol=0, atol=1e-4)


def test_latest_pointer_and_step_choose_the_checkpoint(run: Run, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(run.directory, run_dir)
    (run_dir / "checkpoints" / ".tmp_step_9").mkdir()  # an unfinished checkpoint is never exported
    (run_dir / "checkpoints" / "latest").write_text("step_1\n", encoding="utf-8")
    step_1 = run_dir / "checkpoints" / "step_1" / LORA_FILE

    assert _export(run_dir, tmp_path / "latest")["step"] == 1
    assert _same_tensors(tmp_path / "latest" / LORA_FILE, step_1)
    assert _export(run_dir, tmp_path / "three", "--step", "3")["step"] == 3
    (run_dir / "checkpoints" / "latest").write_text("step_2\n", encoding="utf-8")  # names no checkpoint
    assert _export(run_dir, tmp_path / "dangling")["step"] == 3


def test_usage_errors_exit_2_with_a_message(run: Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"

    def error(*argv: str) -> str:
        capsys.readouterr()
        assert main(["export", *argv]) == 2
        return capsys.readouterr().err

    missing = tmp_path / "nope"
    assert f"error: run directory {str(missing)!r} does not exist" in error(str(missing), "--out", str(out))
    assert "not an omni-rl run directory (no config.resolved.toml)" in error(str(tmp_path), "--out", str(out))
    err = error(str(run.directory), "--step", "7", "--out", str(out))
    assert f"error: {str(run.directory)!r} has no checkpoint of step 7" in err
    assert "hint: available steps: 1, 3; leave out --step for the latest" in err
    assert not out.exists()

    out.mkdir()
    (out / "keep.txt").write_text("mine", encoding="utf-8")
    err = error(str(run.directory), "--out", str(out))
    assert f"error: output directory {str(out)!r} is not empty" in err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]

    empty_run = tmp_path / "empty_run"
    empty_run.mkdir()
    shutil.copy(run.directory / "config.resolved.toml", empty_run)
    assert "has no checkpoints (no checkpoints/step_<N>/)" in error(str(empty_run), "--out", str(tmp_path / "x"))


def test_model_without_export_is_a_runtime_failure(
    run: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from omni_rl_pipelines.pipeline_model import PipelineModel

    monkeypatch.delattr(PipelineModel, "export_pipeline")  # SD3Model inherits it
    out = tmp_path / "out"
    assert main(["export", str(run.directory), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "error: model 'sd3' (SD3Model) cannot export: it has no export_pipeline method" in err
    assert not out.exists()
    assert not list(tmp_path.glob(".out.export-*"))  # no staging directory left behind
