"""MixGRPO-Flash on shapes (`nox -s flash`): does DPM-Solver++(2M) reach Euler's quality with fewer steps?

MixGRPO-Flash (Li et al., 2025) samples the steps outside the SDE window with DPM-Solver++(2M) so that a rollout needs
fewer model calls. This measures what that buys on the shapes benchmark before any training: the base model's val reward
(docs/examples/shapes_sd3.toml's validation set, 48 prompts x 3 images with the seeds the trainer's validation draws for
run.seed 0, CFG 4.5, 32 px) when every step is deterministic and solved by Euler or by DPM-Solver++(2M) at 6, 8, 10 and
20 steps. Both solvers start from the same x_T per image, so the reward difference is paired. The latent RMSE to an
80-step DPM-Solver++(2M) solution says how far each is from the ODE's end point. Both solvers cost the same per step
(one model call, two with CFG; the solver's arithmetic is negligible), so steps are the cost.

The rollout goes through the diffusers backend in training mode with ``flow_sde`` at noise level 0: no step is
stochastic, so every step takes the sampler's ``deterministic_solver()``, exactly as a MixGRPO rollout's steps outside
its window do. Writes its table into docs/benchmarks.md (its own section).
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from report import cpu_name, replace_section

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).parents[1]
HEADING = "## MixGRPO-Flash: DPM-Solver++(2M) vs Euler on shapes"
SOLVERS = {"euler": "Euler", "dpm_solver_2m": "DPM-Solver++(2M)"}
#: the ODE end point the RMSE is taken against (on this model DPM-Solver++(2M) at 80 steps is within ~0.02 of 160)
REFERENCE_STEPS = 80


def validation_set(config: object) -> tuple[list[object], list[int]]:
    """The trainer's validation records and seeds (Trainer.validate): image r of prompt k takes seed r·n + k of
    ``sample_seeds(run_seed, -1, n · repeats)``, prompts in file order, each repeated ``val_images_per_prompt``."""
    from omni_rl.data import read_prompt_source
    from omni_rl.train.trainer import sample_seeds

    data = config.data  # type: ignore[attr-defined]
    records = read_prompt_source(data.val, config_path="$.data.val")
    records = records[: data.val_prompts] if data.val_prompts else records
    n, repeats = len(records), data.val_images_per_prompt
    pool = sample_seeds(config.run.seed, -1, n * repeats)  # type: ignore[attr-defined]
    seeds = [pool[r * n + k] for k in range(n) for r in range(repeats)]
    return [rec for rec in records for _ in range(repeats)], seeds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="docs/examples/shapes_sd3.toml", help="model, val set, CFG and size")
    parser.add_argument("--steps", default="6,8,10,20")
    parser.add_argument("--out", default="docs/benchmarks.md", help="markdown file whose section is rewritten")
    args = parser.parse_args()

    from omni_rl import build, load_config
    from omni_rl.protocols import RolloutRequest

    config = load_config(ROOT / args.config, [f"run.output_dir={ROOT / 'runs' / 'flash_vs_euler'}"])
    model = build("model", config.raw["model"]["name"], config.raw["model"].get("options", {}))
    rollout_options = dict(config.raw["rollout"]["options"])
    rollout_options.update(shared_initial_noise=False)  # each image from its own seed, as validation samples
    guidance = rollout_options.get("eval_cfg") or rollout_options["cfg"]
    reward = build("reward", "shapes", {})
    records, seeds = validation_set(config)
    prompts = [rec.prompt for rec in records]
    request = RolloutRequest(
        prompts=prompts,
        group_ids=list(range(len(prompts))),
        seeds=seeds,
        step=1,
        mode="train",  # the path a rollout's steps outside the window take; nothing is stochastic at noise 0
        record_trajectory=False,
        run_seed=config.run.seed,
        metadata=[rec.metadata for rec in records],
    )

    def sample(solver: str, steps: int) -> tuple[np.ndarray, torch.Tensor]:
        backend = build("rollout", "diffusers", {**rollout_options, "steps": steps, "cfg": guidance})
        sampler = build("sampler", "flow_sde", {"noise_level": 0.0, "ode_solver": solver})
        batch = backend.generate(model, sampler, request)
        scores = np.asarray(reward(batch.images.numpy(), prompts, request.metadata).scores, dtype=np.float64)
        return scores, batch.final_latents

    began = time.perf_counter()
    _, reference = sample("dpm_solver_2m", REFERENCE_STEPS)
    rows = []
    for steps in (int(s) for s in args.steps.split(",")):
        (euler, euler_x), (dpm, dpm_x) = (sample(name, steps) for name in SOLVERS)
        diff = dpm - euler
        paired = f"{diff.mean():+.3f} ± {diff.std(ddof=1) / len(diff) ** 0.5:.3f}"
        rmse = [float((x - reference).pow(2).mean().sqrt()) for x in (euler_x, dpm_x)]
        rows.append(f"| {steps} | {euler.mean():.3f} | {dpm.mean():.3f} | {paired} | {rmse[0]:.3f} | {rmse[1]:.3f} |")
        print(rows[-1], flush=True)
    elapsed = time.perf_counter() - began

    threads = torch.get_num_threads()
    lines = [
        HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {cpu_name()} ({platform.machine()}, {threads} torch thread(s)), "
        f"torch {torch.__version__}, {elapsed:.0f} s: `python benchmarks/flash_vs_euler.py` (`{args.config}`'s "
        f"model and validation set: {len(prompts)} images, the seeds of its step-0 validation, CFG {guidance:g}, "
        f"{rollout_options['height']} px). Every step deterministic (`flow_sde` at noise level 0 through the "
        "diffusers backend's training path), from the same x_T per image for both solvers. Reward: the `shapes` "
        'val reward of the base model; "paired" is the mean per-image difference ± its standard error. RMSE: final '
        f"latents against the {REFERENCE_STEPS}-step DPM-Solver++(2M) solution.",
        "",
        "| steps | Euler | DPM-Solver++(2M) | DPM − Euler (paired) | RMSE Euler | RMSE DPM |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        replace_section(ROOT / args.out, HEADING, text)


if __name__ == "__main__":
    main()
