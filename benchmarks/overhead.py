"""Framework overhead against bare compute, measured side by side in one process (`nox -s bench`, `bench_gpu`).

``--device cpu`` (``nox -s bench``): the tiny test pipeline and a mid-size random SD3 (8 layers, 256 image
tokens) at 64 px, plus the scaling row (one training step with 1 vs 2 CPU policy workers). ``--device cuda``
(``nox -s bench_gpu``): a random-weight model with SD3.5-Medium's transformer dimensions at 512 px in bfloat16,
reporting images/s, update time and the device. Each writes only its own section of docs/benchmarks.md, with
the verdict against the 10% target computed from the ratios (see overhead_case.py for what "bare" runs).

Timings alternate framework / bare over several repeats and report medians; on a GPU every timer is bracketed
by ``torch.cuda.synchronize``. Compare the ratio, not the seconds: shared machines are noisy.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from overhead_case import Setting
from overhead_report import Scaling, Timing, cpu_section, gpu_section, verdict_lines, write_report
from report import cpu_name

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass(frozen=True)
class Size:
    """A random SD3 pipeline to benchmark: ``build_tiny_sd3_pipeline`` arguments and the image size it takes."""

    label: str
    height: int
    shape: dict[str, object] = field(default_factory=dict)
    #: what the report should say about the model beyond its label
    note: str = ""


#: SD3.5-Medium's transformer config (stabilityai/stable-diffusion-3.5-medium, transformer/config.json): 24 layers,
#: 24 heads x 64 (1536 hidden = caption projection), dual attention in layers 0-12, RMS qk-norm, patch 2, 16
#: latent channels, joint attention 4096, pooled 2048. 64x64 latents (512 px with an 8x VAE) = 1024 image tokens.
#: Its pos_embed_max_size is 384; 64 here crops the same sin-cos table (a buffer, no compute).
SD35_MEDIUM_SHAPE: dict[str, object] = dict(
    num_layers=24,
    num_attention_heads=24,
    attention_head_dim=64,
    sample_size=64,
    patch_size=2,
    latent_channels=16,
    qk_norm="rms_norm",
    dual_attention_layers=tuple(range(13)),
    clip_hidden_sizes=(768, 1280),  # pooled 2048, as CLIP-L + CLIP-G
    t5_d_model=4096,  # joint_attention_dim
    text_layers=2,
    vae_block_out_channels=(128, 256, 512, 512),  # SD3's VAE widths, 8x
    vae_norm_num_groups=32,
)

SIZES: dict[str, Size] = {
    "tiny": Size("tiny (2 layers, width 64, 256 image tokens)", 64, dict(num_layers=2)),
    "mid": Size(
        "mid (8 layers, width 256, 256 image tokens)",
        64,
        dict(num_layers=8, num_attention_heads=8, attention_head_dim=32, t5_d_model=256),
    ),
    "sd35m": Size(
        "SD3.5-Medium-sized, random weights (24 layers, width 1536, 1024 image tokens)",
        512,
        SD35_MEDIUM_SHAPE,
        note=(
            "Model: a random-weight transformer of SD3.5-Medium's size ({params} B parameters; 24 layers, 24 heads "
            "x 64, dual attention in layers 0-12, RMS qk-norm, patch 2, joint attention 4096, pooled 2048) at "
            "512 px (64x64 latents, 1024 image tokens). The text encoders are small random ones with the real "
            "output shapes (2-layer CLIPs of widths 768 and 1280, a 2-layer T5 of width 4096; 77 + 256 context "
            "tokens), so prompt encoding is cheaper than with the real encoders; the VAE has SD3's widths "
            "(128-512, 8x) with one layer per block instead of two."
        ),
    ),
}

#: ``--device cpu``: the setting the CPU table has always used
CPU_SETTING = Setting()
#: ``--device cuda``: Flow-GRPO's SD3.5-Medium recipe in shape (10 train steps, CFG 4.5, LoRA 32/64, bf16),
#: two prompts x 8 images, a window of 2 trained steps as in Flow-GRPO-Fast
GPU_SETTING = Setting(
    group_size=8,
    steps=10,
    window=2,
    height=512,
    batch_size=16,  # all 16 samples (32 CFG rows) per transformer call, as diffusers batches them
    micro_batch=4,
    lora_rank=32,
    lora_alpha=64,
    device="cuda",
    dtype="bfloat16",
)
DEFAULT_SIZES = {"cpu": ["tiny", "mid"], "cuda": ["sd35m"]}


def cuda_unavailable_reason() -> str | None:
    """Why the GPU rows cannot run here, or None when a CUDA device is usable."""
    if torch.cuda.is_available():
        return None
    build = (
        "a CPU-only build"
        if torch.version.cuda is None
        else f"built for CUDA {torch.version.cuda}, but it sees no GPU (driver, CUDA_VISIBLE_DEVICES?)"
    )
    return (
        f"no CUDA device: torch {torch.__version__} is {build}. Run `nox -s bench_gpu` on a machine with an NVIDIA "
        "GPU (it uses the installed CUDA torch or installs the default one), or measure on CPU with `nox -s bench`."
    )


def setting_for(args: argparse.Namespace) -> Setting:
    base = GPU_SETTING if args.device == "cuda" else CPU_SETTING
    changes: dict[str, object] = {"device": args.device}
    if args.dtype != "auto":
        changes["dtype"] = args.dtype
    for name in ("steps", "window", "group_size", "micro_batch", "batch_size"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    if args.recompute_old_log_probs:
        changes["recompute_old_log_probs"] = True
    return replace(base, **changes)


def build_pipeline(size_key: str, cache: Path) -> Path:
    """The size's random pipeline under ``cache`` (built once; reused when ``--cache-dir`` keeps it)."""
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    return build_tiny_sd3_pipeline(cache / f"bench_{size_key}", seed=0, exist_ok=True, **SIZES[size_key].shape)


def bench_sizes(keys: list[str], setting: Setting, cache: Path, repeats: int) -> tuple[list[Timing], list[str]]:
    """Timings per size, and the notes the report prints about the models."""
    from overhead_case import OverheadCase, measure

    timings, notes = [], []
    for key in keys:
        size = SIZES[key]
        started = time.perf_counter()
        path = build_pipeline(key, cache)
        case = OverheadCase(path, replace(setting, height=size.height))
        print(f"{size.label}: model ready in {time.perf_counter() - started:.0f} s", flush=True)
        timing = measure(case, size.label, repeats)
        print(timing, flush=True)
        timings.append(timing)
        if size.note:
            params = sum(p.numel() for n, p in case.model.transformer.named_parameters() if "lora_" not in n)
            notes.append(size.note.format(params=f"{params / 1e9:.2f}"))
        del case
        gc.collect()
        if setting.device == "cuda":
            torch.cuda.empty_cache()
    return timings, notes


def bench_scaling(workdir: Path, steps: int = 4) -> Scaling:
    """Median training-step seconds with 1 and 2 CPU policy workers on the mid-size model (same config)."""
    import json

    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    from omni_rl.cli import main as cli

    path = build_tiny_sd3_pipeline(workdir / "mid_scaling", seed=0, **SIZES["mid"].shape)
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
    description = (
        "Scaling: one Flow-GRPO training step (8 images, 64 px, 6 steps, mid-size model) with N CPU policy workers "
        f"(1 CPU each, gloo process group), median over steps 2-{steps}:"
    )
    return Scaling(description, result)


def cpu_context(setting: Setting, repeats: int) -> list[str]:
    machine = (
        f"{cpu_name()}, {os.cpu_count()} CPU threads ({torch.get_num_threads()} used by torch), "
        f"torch {torch.__version__}"
    )
    return [
        f"Measured {time.strftime('%Y-%m-%d')} on {machine}; medians of {repeats} alternating runs in one process.",
        setting.describe(),
    ]


def gpu_context(setting: Setting, repeats: int, notes: list[str]) -> list[str]:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    device = (
        f"{torch.cuda.get_device_name()} (1 GPU, {props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}, host {cpu_name()} with {os.cpu_count()} CPU threads"
    )
    return [
        f"Measured {time.strftime('%Y-%m-%d')} on {device}; medians of {repeats} alternating runs in one process, "
        "every timer synchronised with the GPU.",
        setting.describe(),
        *notes,
        "images/s is the framework rollout's (prompt encoding, sampling and VAE decode); the update column is one "
        "optimizer step over that rollout.",
    ]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/benchmarks.md")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="cpu: `bench` rows; cuda: GPU rows")
    parser.add_argument(
        "--dtype", choices=("auto", "float32", "bfloat16"), default="auto", help="auto: bfloat16 on cuda, else float32"
    )
    parser.add_argument("--sizes", nargs="+", choices=sorted(SIZES), help="default: tiny mid (cpu), sd35m (cuda)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, help="rollout steps (default 6 on cpu, 10 on cuda)")
    parser.add_argument("--window", type=int, help="SDE window = trained steps per sample (default 2)")
    parser.add_argument("--group-size", type=int, help="images per prompt, 2 prompts (default 4 cpu, 8 cuda)")
    parser.add_argument("--batch-size", type=int, help="samples per rollout transformer call (default 8)")
    parser.add_argument("--micro-batch", type=int, help="samples per update forward/backward (default 4)")
    parser.add_argument("--recompute-old-log-probs", action="store_true", help="time the no-grad pass too")
    parser.add_argument("--no-scaling", action="store_true", help="cpu: skip the 1 vs 2 worker row (starts Ray)")
    parser.add_argument("--cache-dir", help="keep the random pipelines here for the next run (default: a temp dir)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.device == "cuda" and (reason := cuda_unavailable_reason()):
        raise SystemExit(f"overhead.py --device cuda: {reason}")
    keys = args.sizes or DEFAULT_SIZES[args.device]
    setting = replace(setting_for(args), height=SIZES[keys[0]].height)  # each size runs at its own height
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(args.cache_dir) if args.cache_dir else Path(tmp)
        timings, notes = bench_sizes(keys, setting, cache, args.repeats)
        if args.device == "cuda":
            from flops import peak_flops

            section = gpu_section(
                timings, gpu_context(setting, args.repeats, notes), peak_flops(torch.cuda.get_device_name())
            )
        else:
            scaling = None if args.no_scaling else bench_scaling(Path(tmp))
            section = cpu_section(timings, scaling, [*cpu_context(setting, args.repeats), *notes])
    write_report(Path(args.out), section)
    print("\n".join(verdict_lines(timings)))


if __name__ == "__main__":
    main()
