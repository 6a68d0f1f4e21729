"""Framework overhead against bare compute, measured side by side in one process (`nox -s bench`).

For each model size (the tiny test pipeline and a mid-size random SD3: 8 layers, 256 image tokens):

- rollout: the diffusers backend's ``generate`` (Flow-GRPO train mode: SDE window, log-probs recorded) against a
  bare loop doing the same compute with no framework: the pipeline's own ``encode_prompt``, the same transformer
  calls (same batch sizes, CFG batching), Euler steps with comparable elementwise noise arithmetic in the
  window, and the VAE decode.
- update: ``TrajectoryUpdate.run`` against bare forward + backward of the same micro-batches × window steps and
  the same optimizer steps (old log-probs reused from the rollout in both, so the compute is identical).

Timings alternate framework / bare over several repeats and report medians; the ratio is framework / bare.
The machines are noisy: compare the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from report import replace_section

os.environ.setdefault("HF_HUB_OFFLINE", "1")

SIZES = {
    "tiny (2 layers, width 64, 256 image tokens)": dict(num_layers=2),
    "mid (8 layers, width 256, 256 image tokens)": dict(
        num_layers=8, num_attention_heads=8, attention_head_dim=32, t5_d_model=256
    ),
}


def _timeit(fn: Callable[[], object], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def bench_size(label: str, shape: dict, workdir: Path, repeats: int) -> dict[str, float]:
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    from omni_rl import build
    from omni_rl.protocols import RolloutRequest
    from omni_rl.runtime.update import TrajectoryUpdate
    from omni_rl.schema import OptimConfig

    path = build_tiny_sd3_pipeline(workdir / label.split()[0], seed=0, **shape)
    steps, group, cfg, height = 6, 4, 4.5, 64
    model = build("model", "sd3", {"path": str(path), "lora_rank": 16})
    sampler = build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 2], "window_mode": "fixed"})
    backend = build(
        "rollout",
        "diffusers",
        {"group_size": group, "steps": steps, "height": height, "width": height, "cfg": cfg, "batch_size": 8},
    )
    prompts = ["a red circle"] * group + ["two blue squares"] * group
    request = RolloutRequest(
        prompts=prompts, group_ids=[0] * group + [1] * group, seeds=list(range(len(prompts))), step=1, run_seed=0
    )
    pipe = model.build_pipeline()

    def framework_rollout() -> object:
        return backend.generate(model, sampler, request)

    @torch.no_grad()
    def bare_rollout() -> object:
        shape_c = model.latent_shape(height, height)
        embeds, neg, pooled, neg_pooled = pipe.encode_prompt(
            list(dict.fromkeys(prompts)), None, None, do_classifier_free_guidance=True, device="cpu"
        )
        index = torch.tensor([0] * group + [1] * group)
        embeds, neg, pooled, neg_pooled = embeds[index], neg[index], pooled[index], neg_pooled[index]
        sigmas = model.sigma_schedule(steps, height, height)
        gens = [torch.Generator().manual_seed(s) for s in range(len(prompts))]
        x = torch.stack([torch.randn(shape_c, generator=g) for g in gens])
        for i in range(steps):
            t = sigmas[i].expand(len(prompts)) * 1000
            out = pipe.transformer(
                hidden_states=torch.cat([x, x]),
                timestep=torch.cat([t, t]),
                encoder_hidden_states=torch.cat([neg, embeds]),
                pooled_projections=torch.cat([neg_pooled, pooled]),
                return_dict=False,
            )[0]
            u, c = out.chunk(2)
            v = u + cfg * (c - u)
            dt = sigmas[i + 1] - sigmas[i]
            x = x + v * dt
            if i < 2:
                z = torch.stack([torch.randn(shape_c, generator=g) for g in gens])
                x = x + 0.1 * z  # same arithmetic order of magnitude as the SDE step
                _ = -((z * 0.1) ** 2).mean(dim=(1, 2, 3))
        latents = x / pipe.vae.config.scaling_factor + pipe.vae.config.shift_factor
        image = pipe.vae.decode(latents, return_dict=False)[0]
        return (image / 2 + 0.5).clamp(0, 1).mul(255).round().to(torch.uint8)

    batch = framework_rollout()
    loss = build("loss", "flow_grpo", {})
    params = model.trainable_parameters()
    optim = OptimConfig(micro_batch=4, recompute_old_log_probs=False)
    optimizer = torch.optim.AdamW(params, lr=1e-5)
    engine = TrajectoryUpdate(model, sampler, loss, optimizer, optim)
    advantages = torch.randn(len(prompts))

    def framework_update() -> object:
        return engine.run(batch, advantages, {}, generator=torch.Generator().manual_seed(0))

    def bare_update() -> object:
        traj = batch.trajectory
        cond = batch.conditioning.tensors
        optimizer.zero_grad()
        for start in range(0, len(prompts), 4):
            idx = torch.arange(start, start + 4)
            for j in range(traj.latents.shape[1]):
                x = traj.latents[idx, j]
                t = traj.sigmas[idx, j] * 1000
                out = pipe.transformer(
                    hidden_states=torch.cat([x, x]),
                    timestep=torch.cat([t, t]),
                    encoder_hidden_states=torch.cat([cond["negative_prompt_embeds"][idx], cond["prompt_embeds"][idx]]),
                    pooled_projections=torch.cat(
                        [cond["negative_pooled_prompt_embeds"][idx], cond["pooled_prompt_embeds"][idx]]
                    ),
                    return_dict=False,
                )[0]
                u, c = out.chunk(2)
                v = u + cfg * (c - u)
                mean = x + v * (traj.next_sigmas[idx, j] - traj.sigmas[idx, j]).view(-1, 1, 1, 1)
                logp = -((traj.next_latents[idx, j] - mean) ** 2).mean(dim=(1, 2, 3))
                ratio = torch.exp(logp - traj.log_probs[idx, j])
                (-(advantages[idx] * ratio).mean()).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    # warm up both, then alternate
    bare_rollout(), framework_update(), bare_update()
    fr, br, fu, bu = [], [], [], []
    for _ in range(repeats):
        fr += _timeit(framework_rollout, 1)
        br += _timeit(bare_rollout, 1)
        fu += _timeit(framework_update, 1)
        bu += _timeit(bare_update, 1)
    med = statistics.median
    return {
        "rollout_framework_s": med(fr),
        "rollout_bare_s": med(br),
        "rollout_ratio": med(fr) / med(br),
        "update_framework_s": med(fu),
        "update_bare_s": med(bu),
        "update_ratio": med(fu) / med(bu),
        "images_per_s": len(prompts) / med(fr),
    }


def bench_scaling(workdir: Path, steps: int = 4) -> dict[int, float]:
    """Median training-step seconds with 1 and 2 CPU policy workers on the mid-size model (same config)."""
    import json

    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    from omni_rl.cli import main as cli

    path = build_tiny_sd3_pipeline(
        workdir / "mid_scaling", seed=0, **SIZES["mid (8 layers, width 256, 256 image tokens)"]
    )
    example = Path(__file__).parents[1] / "docs" / "examples" / "sd3_tiny_jpeg.toml"
    result = {}
    for workers in (1, 2):
        out = workdir / f"scaling_{workers}"
        sets = [
            f"run.output_dir={out}",
            f"model.options.path={path}",
            f"run.steps={steps}",
            "run.save_every=0",
            "rollout.options.group_size=4",
            "rollout.options.steps=6",
            "rollout.options.batch_size=4",
            "data.prompts_per_step=2",
            "optim.micro_batch=4",
            f"cluster.workers={workers}",
            "cluster.cpus_per_worker=1",
            "log.image_every=0",
            'log.backends=["jsonl"]',
        ]
        assert cli(["run", str(example), *[a for s in sets for a in ("--set", s)]]) == 0
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        result[workers] = statistics.median(row["perf/step_s"] for row in rows[1:])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/benchmarks.md")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, shape in SIZES.items():
            result = bench_size(label, shape, Path(tmp), args.repeats)
            rows.append((label, result))
            print(label, {k: round(v, 4) for k, v in result.items()})
        scaling = bench_scaling(Path(tmp))
        print("scaling", scaling)
    write_report(Path(args.out), rows, scaling)


def write_report(path: Path, rows: list[tuple[str, dict[str, float]]], scaling: dict[int, float]) -> None:
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU threads, torch {torch.__version__}"
    lines = [
        "## Framework overhead (`nox -s bench`)",
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {machine}; medians of alternating runs in one process.",
        "Flow-GRPO train rollout (8 images, 6 steps, SDE window of 2, CFG 4.5, 64 px) and one update over it.",
        "",
        "| model | rollout: omni-rl s | bare s | ratio | update: omni-rl s | bare s | ratio | images/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for label, r in rows:
        lines.append(
            f"| {label} | {r['rollout_framework_s']:.3f} | {r['rollout_bare_s']:.3f} | {r['rollout_ratio']:.3f} "
            f"| {r['update_framework_s']:.3f} | {r['update_bare_s']:.3f} | {r['update_ratio']:.3f} "
            f"| {r['images_per_s']:.1f} |"
        )
    lines += [
        "",
        "Scaling: one Flow-GRPO training step (8 images, 64 px, 6 steps, mid-size model) with N CPU policy workers",
        "(1 CPU each, gloo process group), median over steps 2-4:",
        "",
        "| workers | step s | speed-up |",
        "|---|---|---|",
    ]
    for workers, seconds in scaling.items():
        lines.append(f"| {workers} | {seconds:.2f} | {scaling[1] / seconds:.2f}x |")
    replace_section(path, "## Framework overhead", "\n".join(lines))


if __name__ == "__main__":
    main()
