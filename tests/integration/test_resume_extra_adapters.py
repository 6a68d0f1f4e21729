"""Exact resume of a loss that keeps extra LoRA adapters: DiffusionNFT's "old" policy trails the trained one
(old ← d·old + (1 − d)·θ, d ramping with the optimizer steps taken), so a checkpoint must hold the old adapter's
weights and the optimizer-step count, not only the trained weights. A run resumed from the checkpoint of step 3
repeats steps 4-6 of the uninterrupted run bit for bit."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from omni_rl.cli import main

PROMPTS = Path(__file__).parents[2] / "docs" / "examples" / "prompts" / "objects.txt"

CONFIG = """
[run]
steps = 6
seed = 0
save_every = 3

[cluster]
address = "local"
cpus_per_worker = 1

[data]
train = "{prompts}"
prompts_per_step = 2

[algorithm]
name = "diffusion_nft"   # ode sampler, grpo, old policy with the "ramp" decay refreshed after every update

[model]
name = "sd3"
options = {{ path = "{model}", dtype = "float32", lora_rank = 4, lora_alpha = 4, lora_target_modules = [
  "attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0", "ff.net.0.proj", "ff.net.2",
] }}

[rollout]
name = "diffusers"
options = {{ group_size = 2, steps = 2, eval_steps = 2, height = 32, width = 32, cfg = 1.0, eval_cfg = 1.0 }}

[[reward]]
name = "jpeg_compressibility"

[loss]
name = "diffusion_nft"
options = {{ num_steps = 2, timesteps = 2, kl_coef = 0.0 }}

[optim]
lr = 3e-2                # large enough that the policy, and so the old adapter, moves visibly in 3 steps

[log]
backends = ["jsonl"]
image_every = 0
"""


def _run(config: Path, out: Path, *extra: str) -> None:
    sets = [f"run.output_dir={out}", *extra]
    assert main(["run", str(config), *[a for s in sets for a in ("--set", s)]]) == 0


def _rows(run_dir: Path) -> dict[int, dict]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {row["step"]: {k: v for k, v in row.items() if not k.startswith("perf/")} for row in rows}


def _worker_tensors(run_dir: Path, step: int, name: str) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "checkpoints" / f"step_{step}" / "worker_0" / name))


def test_diffusion_nft_resumes_its_old_adapter_exactly(tmp_path: Path, tiny_sd3: Path, ray_cluster: None) -> None:
    config = tmp_path / "nft.toml"
    config.write_text(CONFIG.format(prompts=PROMPTS, model=tiny_sd3))
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    _run(config, straight)
    old_at_3 = _worker_tensors(straight, 3, "adapters.safetensors")
    assert old_at_3 and all(".old." in name for name in old_at_3)

    _run(config, resumed, f'run.resume="{straight / "checkpoints" / "step_3"}"')
    expected, got = _rows(straight), _rows(resumed)
    assert sorted(got) == [4, 5, 6]
    for step in (4, 5, 6):
        assert got[step] == expected[step], f"step {step} differs after resume"
    for name in ("adapters.safetensors", "trainable.safetensors"):
        want, have = _worker_tensors(straight, 6, name), _worker_tensors(resumed, 6, name)
        assert sorted(have) == sorted(want)
        assert all(torch.equal(have[k], want[k]) for k in want), f"{name} differs at step 6"
