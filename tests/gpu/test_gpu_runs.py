"""Every example a tiny or shipped model can run, and every runtime path, through ``omni-rl run`` on one GPU
(``cluster.gpus_per_worker = 1``), two steps each. Each run exits 0, its first step's on-policy ratio is 1 within
its dtype's tolerance (recomputed old log-probs: ``rollout_corr/abs_delta_max``), every loss is finite and the
LoRA gradient is not zero (tests/gpu/checks.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gpu_checks import check_rows, on_this_machine, report

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "docs" / "examples"
STEPS = 2
#: what every run shares: two steps, no evaluation or image grids, one GPU per policy worker
COMMON = (
    f"run.steps={STEPS}",
    "run.eval_every=0",
    "run.eval_before_training=false",
    "log.image_every=0",
    "cluster.gpus_per_worker=1",
    "cluster.cpus_per_worker=1",
)
#: trajectory losses recompute the old log-probs, so the first step's on-policy ratio is measured
RECOMPUTE = ("optim.recompute_old_log_probs=true",)
TINY_MODEL = {"sd3_tiny_jpeg": "sd3", "qwen_image_tiny": "qwen_image", "flux_tiny_jpeg": "flux", "wan_tiny": "wan"}
#: example -> (extra --set overrides, dtype of the compute that the ratio check allows for)
EXAMPLE_CASES: dict[str, tuple[tuple[str, ...], str]] = {
    "quickstart": (RECOMPUTE, "float32"),
    "sd3_tiny_jpeg": (RECOMPUTE, "float32"),
    "qwen_image_tiny": (RECOMPUTE, "float32"),
    "flux_tiny_jpeg": (RECOMPUTE, "float32"),
    "wan_tiny": (RECOMPUTE, "float32"),
    "shapes_sd3": (RECOMPUTE, "float32"),
    "shapes_mix_grpo": (RECOMPUTE, "float32"),
    "shapes_dance_grpo": (RECOMPUTE, "float32"),
    "shapes_grpo_guard": (RECOMPUTE, "float32"),
    "shapes_flow_dppo": (RECOMPUTE, "float32"),
    "shapes_diffusion_nft": ((), "float32"),
    "shapes_awm": ((), "float32"),
    "shapes_dpo": (("loss.options.min_reward_spread=0.0",), "float32"),
}
#: runtime paths on the sd3_tiny_jpeg example: disaggregated rollout sharing the GPU (fractional GPUs) at both
#: staleness levels, FSDP2 with bf16 mixed precision on a group of one, every rollout-correction mode, a bf16
#: rollout, the recompute on its own
SMALL = (
    "rollout.options.height=32",
    "rollout.options.width=32",
    "rollout.options.group_size=4",
    "rollout.options.batch_size=8",
    "data.prompts_per_step=2",
    "optim.micro_batch=2",
    "optim.mini_batch=4",
)
SHARED_GPU = ("cluster.gpus_per_worker=0.5", "cluster.rollout_workers=1", "cluster.rollout_gpus_per_worker=0.5")
PATH_CASES: dict[str, tuple[tuple[str, ...], str]] = {
    "rollout_workers_staleness_0": ((*SHARED_GPU, "run.max_staleness=0", *RECOMPUTE), "float32"),
    "rollout_workers_staleness_1": ((*SHARED_GPU, "run.max_staleness=1", *RECOMPUTE), "float32"),
    "fsdp2_bf16": (('cluster.strategy="fsdp2"', 'cluster.mixed_precision="bf16"', *RECOMPUTE), "bfloat16"),
    "correction_off_recompute": (("rollout_correction.mode=off", *RECOMPUTE), "float32"),
    "correction_bypass": (("rollout_correction.mode=bypass", "rollout_correction.rejection=step_k1"), "float32"),
    "correction_decoupled": (
        ("rollout_correction.mode=decoupled", "rollout_correction.rejection=sample_max_k1"),
        "float32",
    ),
    "rollout_bf16": (("rollout.options.dtype=bfloat16", "rollout_correction.mode=decoupled"), "bfloat16"),
    # issue 29: the speed options and "auto" batch sizes keep the first step's ratio at 1
    "compile_regional": (('model.options.compile="regional"', *RECOMPUTE), "float32"),
    "attention_efficient": (('model.options.attention_backend="efficient"', *RECOMPUTE), "float32"),
    "batch_size_auto": (('rollout.options.batch_size="auto"', 'optim.micro_batch="auto"', *RECOMPUTE), "float32"),
    "cuda_graphs": (("model.options.cuda_graphs=true", *RECOMPUTE), "float32"),
    # the rollout copy's graphs read each new weights version, copied into the same tensors in place
    "cuda_graphs_rollout_workers": (
        (*SHARED_GPU, "run.max_staleness=1", "model.options.cuda_graphs=true", *RECOMPUTE),
        "float32",
    ),
}


def run(config: Path, out: Path, sets: tuple[str, ...] | list[str]) -> list[dict]:
    from omni_rl.cli import main

    every = on_this_machine([f"run.output_dir={out}", *COMMON, *sets])
    argv = ["run", str(config), *[a for s in every for a in ("--set", s)]]
    assert main(argv) == 0, f"omni-rl {' '.join(argv)} failed"
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _model_sets(name: str, models: dict[str, Path]) -> tuple[str, ...]:
    return (f"model.options.path={models[TINY_MODEL[name]]}",) if name in TINY_MODEL else ()


@pytest.mark.parametrize("name", sorted(EXAMPLE_CASES))
def test_example_on_gpu(name: str, tmp_path: Path, gpu_ray: None, tiny_models: dict[str, Path]) -> None:
    sets, dtype = EXAMPLE_CASES[name]
    rows = run(EXAMPLES / f"{name}.toml", tmp_path / name, (*_model_sets(name, tiny_models), *sets))
    report(name, check_rows(rows, STEPS, dtype))


@pytest.mark.parametrize("name", sorted(PATH_CASES))
def test_runtime_path_on_gpu(name: str, tmp_path: Path, gpu_ray: None, tiny_models: dict[str, Path]) -> None:
    sets, dtype = PATH_CASES[name]
    model = f"model.options.path={tiny_models['sd3']}"
    rows = run(EXAMPLES / "sd3_tiny_jpeg.toml", tmp_path / name, (model, *SMALL, *sets))
    report(name, check_rows(rows, STEPS, dtype))


def test_dpo_offline_on_gpu(tmp_path: Path, gpu_ray: None, tiny_models: dict[str, Path]) -> None:
    """Offline Diffusion-DPO from a preference file (chosen: plain colours, rejected: noise)."""
    import numpy as np
    from PIL import Image

    lines = []
    for k, prompt in enumerate(["a red circle", "a blue square", "two green triangles", "a yellow star"]):
        chosen, rejected = tmp_path / f"chosen_{k}.png", tmp_path / f"rejected_{k}.png"
        Image.fromarray(np.full((32, 32, 3), (40 * k, 120, 200), dtype=np.uint8)).save(chosen)
        noise = np.random.default_rng(k).integers(0, 256, size=(32, 32, 3), dtype=np.uint8)
        Image.fromarray(noise).save(rejected)
        lines.append(json.dumps({"prompt": prompt, "chosen": str(chosen), "rejected": str(rejected)}))
    data = tmp_path / "preferences.jsonl"
    data.write_text("\n".join(lines) + "\n")
    config = tmp_path / "dpo_offline.toml"
    config.write_text(
        f'[data]\ntrain = "{data}"\nprompts_per_step = 2\n\n[algorithm]\nname = "dpo_offline"\n\n'
        f'[model]\nname = "sd3"\noptions = {{ path = "{tiny_models["sd3"]}", lora_rank = 4 }}\n\n'
        '[rollout]\nname = "preference_pairs"\noptions = { height = 32, width = 32 }\n\n'
        '[[reward]]\nname = "jpeg_compressibility"\n\n[loss]\nname = "dpo"\noptions = { beta = 1000.0 }\n\n'
        "[optim]\nlr = 1e-3\nmicro_batch = 8\n"
    )
    rows = run(config, tmp_path / "run", ())
    report("dpo_offline", check_rows(rows, STEPS))
