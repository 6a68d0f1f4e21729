"""Each speed option's measured effect, side by side in one process (`nox -s bench_speed_options`).

The model and setting are `nox -s bench_gpu`'s (benchmarks/overhead.py: the SD3.5-Medium-sized random pipeline at
512 px in bfloat16, 2 prompts x 8 images, 10 steps, SDE window 2, CFG 4.5, LoRA 32/64), with the old log-probs
recomputed (the options that need it are refused without it). For every option, alone, the framework's rollout
and one update are timed (medians of ``--repeats`` after a warm-up, every timer synchronised with the GPU) and
put beside the all-off baseline, which is measured first and again last so drift shows. Each row also says:

- the first rollout's seconds (one-time costs: compiling the blocks, capturing the CUDA graphs);
- the first update's on-policy ratio (mean exp(new - old) before the optimizer step: 1 when the old log-probs are
  recomputed through the forward the update trains), and the largest |log-prob difference| between the rollout's
  numbers and that recompute (how far a compiled or graphed rollout is from the trained forward);
- the peak GPU memory (what ``vae_slicing``/``vae_tiling`` are for).

An option that fails (a kernel the GPU lacks, a capture the model's forward does not allow) gets a row with its
error instead of stopping the others. ``--device cpu --size tiny`` runs the options that work on a CPU (a
check of this script, not a measurement worth a table); only ``--device cuda`` rewrites the section of
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from overhead import CPU_SETTING, GPU_SETTING, SIZES, build_pipeline, cuda_unavailable_reason, gpu_context
from overhead_case import OverheadCase, Setting, timed
from report import replace_section

SECTION = '## Speed options and "auto" batch sizes'


@dataclass(frozen=True)
class Variant:
    """One row: the options it sets and what they should change."""

    key: str
    label: str
    expect: str
    model_options: tuple[tuple[str, object], ...] = ()
    #: rollout ``batch_size`` and update ``micro_batch`` = "auto"
    auto_batch: bool = False
    cuda_only: bool = False


VARIANTS: tuple[Variant, ...] = (
    Variant("off", "all off (baseline)", "—"),
    Variant(
        "compile",
        '`[model] options.compile = "regional"`',
        "transformer calls faster after a one-time compile of each block",
        (("compile", "regional"),),
    ),
    Variant(
        "cuda_graphs",
        "`[model] options.cuda_graphs = true`",
        "no-grad transformer calls replayed from a graph captured per shape (no Python between kernels)",
        (("cuda_graphs", True),),
        cuda_only=True,
    ),
    Variant(
        "compile_cuda_graphs",
        '`compile = "regional"` + `cuda_graphs = true`',
        "both: compiled blocks inside the captured graphs",
        (("compile", "regional"), ("cuda_graphs", True)),
        cuda_only=True,
    ),
    *(
        Variant(
            backend,
            f'`[model] options.attention_backend = "{backend}"`',
            "the SDPA kernel of every transformer call",
            (("attention_backend", backend),),
            cuda_only=backend != "math",
        )
        for backend in ("flash", "cudnn", "efficient", "math")
    ),
    Variant(
        "vae_channels_last",
        "`[model] options.vae_channels_last = true`",
        "VAE decode time (cuDNN's channels-last convolution kernels)",
        (("vae_channels_last", True),),
    ),
    Variant(
        "vae_slicing",
        "`[model] options.vae_slicing = true`",
        "decode memory at large chunks (not speed)",
        (("vae_slicing", True),),
    ),
    Variant(
        "vae_tiling",
        "`[model] options.vae_tiling = true`",
        "decode memory at large sizes (not speed)",
        (("vae_tiling", True),),
    ),
    Variant(
        "auto",
        '`[rollout] batch_size = "auto"`, `[optim] micro_batch = "auto"`',
        "the rollout's chunk and the update's micro-batch grow to what fits",
        auto_batch=True,
    ),
)
BY_KEY = {v.key: v for v in VARIANTS}
#: what the CPU check runs by default: the options a CPU worker accepts, without compiling (minutes on a CPU)
CPU_DEFAULT = ("off", "math", "vae_channels_last", "vae_slicing", "auto")


@dataclass
class Result:
    variant: Variant
    rollout_s: float = float("nan")
    update_s: float = float("nan")
    first_rollout_s: float = float("nan")
    ratio_mean: float = float("nan")
    abs_delta_max: float = float("nan")
    peak_gib: float | None = None
    images: int = 0
    error: str = ""


def setting_for(variant: Variant, base: Setting) -> Setting:
    changes: dict[str, object] = {"model_options": variant.model_options, "recompute_old_log_probs": True}
    if variant.auto_batch:
        changes |= {"batch_size": "auto", "micro_batch": "auto"}
    return replace(base, **changes)


def measure(path: Path, variant: Variant, base: Setting, repeats: int) -> Result:
    """The variant's timings on the framework side (the bare loop does not take the options)."""
    result = Result(variant, images=base.images)
    cuda = base.device == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    try:
        case = OverheadCase(path, setting_for(variant, base))
        result.first_rollout_s = case.first_rollout_s
        stats = case.engine.run(case.batch, case.advantages, {}, generator=torch.Generator().manual_seed(0))
        result.ratio_mean = stats.mean("ratio_mean")
        result.abs_delta_max = float(stats.rollout_corr.get("abs_delta_max", float("nan")))
        case.framework_rollout()  # warm-up after the first call's one-time costs
        rollouts, updates = [], []
        for _ in range(repeats):
            rollouts.append(timed(case, case.framework_rollout))
            updates.append(timed(case, case.framework_update))
        result.rollout_s, result.update_s = statistics.median(rollouts), statistics.median(updates)
        if cuda:
            result.peak_gib = torch.cuda.max_memory_allocated() / 2**30
        del case
    except Exception as error:  # one option failing must not lose the other rows
        result.error = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
    return result


def _ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}×" if value == value and baseline == baseline and baseline > 0 else "—"


def rows(results: list[Result]) -> list[str]:
    """The table: one row per option, times as ratios to the mean of the two baseline runs."""
    baselines = [r for r in results if r.variant.key == "off" and not r.error]
    base_rollout = statistics.mean(r.rollout_s for r in baselines) if baselines else float("nan")
    base_update = statistics.mean(r.update_s for r in baselines) if baselines else float("nan")
    lines = [
        "| option | what it should change | rollout s (× off) | images/s | update s (× off) | first rollout s | "
        "first ratio | max \\|Δ log p\\| | peak GiB |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        if r.error:
            lines.append(f"| {r.variant.label} | {r.variant.expect} | failed: {r.error} | | | | | | |")
            continue
        peak = f"{r.peak_gib:.1f}" if r.peak_gib is not None else "—"
        lines.append(
            f"| {r.variant.label} | {r.variant.expect} | {r.rollout_s:.3f} ({_ratio(r.rollout_s, base_rollout)}) | "
            f"{r.images / r.rollout_s:.2f} | {r.update_s:.3f} ({_ratio(r.update_s, base_update)}) | "
            f"{r.first_rollout_s:.1f} | {r.ratio_mean:.6f} | {r.abs_delta_max:.2g} | {peak} |"
        )
    return lines


def section(results: list[Result], context: list[str]) -> str:
    return "\n".join(
        [
            SECTION + " (`nox -s bench_speed_options`)",
            "",
            *context,
            "Each option alone against all off (baseline measured first and again last); times are the framework's "
            'rollout and one update, "first ratio" is the first update\'s mean on-policy ratio before its optimizer '
            "step, max |Δ log p| the largest difference between the rollout's log-probs and their recompute through "
            "the trained forward. Off by default, every option is bit-identical to a model without it when off "
            "(`tests/integration/test_speed_options.py`, `test_cuda_graphs.py`, `test_auto_batch.py`).",
            "",
            *rows(results),
            "",
        ]
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/benchmarks.md")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--size", choices=sorted(SIZES), help="default: sd35m on cuda, tiny on cpu")
    parser.add_argument("--only", nargs="+", choices=sorted(BY_KEY), help="these options (and the baseline)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cache-dir", help="keep the random pipeline here for the next run (default: a temp dir)")
    return parser.parse_args(argv)


def chosen(args: argparse.Namespace) -> list[Variant]:
    keys = args.only or ([v.key for v in VARIANTS] if args.device == "cuda" else list(CPU_DEFAULT))
    picked = [BY_KEY[k] for k in dict.fromkeys(["off", *keys])]
    if args.device == "cpu":
        picked = [v for v in picked if not v.cuda_only]
    return [*picked, BY_KEY["off"]]  # the baseline again last: drift shows


def main(argv: list[str] | None = None) -> list[Result]:
    args = parse_args(argv)
    if args.device == "cuda" and (reason := cuda_unavailable_reason()):
        print(f"speed_options.py --device cuda: {reason}")
        return []
    size_key = args.size or ("sd35m" if args.device == "cuda" else "tiny")
    base = replace(GPU_SETTING if args.device == "cuda" else CPU_SETTING, height=SIZES[size_key].height)
    base = replace(base, device=args.device)
    variants = chosen(args)
    results: list[Result] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = build_pipeline(size_key, Path(args.cache_dir) if args.cache_dir else Path(tmp))
        for variant in variants:
            result = measure(path, variant, base, args.repeats)
            print(result, flush=True)
            results.append(result)
            if args.device == "cuda":  # after every option: a run stopped at its time limit keeps what it measured
                context = gpu_context(base, args.repeats, [f"Model: {SIZES[size_key].label}."])
                if len(results) < len(variants):
                    context.append(f"Partial: {len(results)} of the {len(variants)} runs measured so far.")
                replace_section(Path(args.out), SECTION, section(results, context))
    if args.device == "cuda":
        print(f"wrote the speed options section of {args.out}")
    else:
        print("\n".join(rows(results)))
    return results


if __name__ == "__main__":
    main()
