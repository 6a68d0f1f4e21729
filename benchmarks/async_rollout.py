"""Colocated vs disaggregated rollout, side by side in one Ray session (``nox -s bench_async``).

Two measurements, each printed as markdown for docs/benchmarks.md:

``steps`` (the default): three runs of the sd3_tiny_jpeg example on the CPU, the same steps and seeds: colocated
with 2 policy workers, 1 policy + 1 rollout worker at ``max_staleness = 0`` and at ``1``. For each, the median
``perf/step_s``, ``perf/rollout_s`` (waiting for the batch) and ``perf/train_s`` (update and weight sync) with the
first step left out (start-up), and for the disaggregated runs the weight sync's seconds and bytes per step. The
verdict compares the one-step-off step with max(rollout, update) of the synchronous disaggregated run, the bound
overlapping the two can reach (target: at most 1.1x). ``--model mid`` builds overhead.py's mid-size random SD3
(8 layers, width 256) for it; ``--model-path`` takes any SD3 directory.

``--device cuda`` (``nox -s bench_gpu``): the same three kinds of run on GPUs, bf16, on overhead.py's random
SD3.5-Medium-sized model at 512 px (2 prompts x 8 images, 10 rollout steps, CFG 4.5): colocated on every GPU, and
the GPUs split between policy and rollout workers (on one GPU, each side gets half of it), written to the GPU
section of docs/benchmarks.md.

``shapes``: the SD3 shapes example (Flow-GRPO, docs/examples/shapes_sd3.toml) synchronous (colocated, 2 workers) and
one-step-off (1 policy + 1 rollout worker, ``max_staleness = 1``), on the same 2 CPUs, for each ``--seeds``: the
val reward at equal steps and after the same wall-clock of training (the summed ``perf/step_s``, validation
excluded), read at the last evaluation inside the shorter run's clock.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).parents[1]
CASES = {
    "colocated, 2 workers": ("cluster.workers=2",),
    "disaggregated 1+1, staleness 0": ("cluster.rollout_workers=1",),
    "disaggregated 1+1, staleness 1": ("cluster.rollout_workers=1", "run.max_staleness=1"),
}
SHAPES_CASES = {
    "synchronous (colocated, 2 workers)": ("cluster.workers=2",),
    "one-step-off (1 policy + 1 rollout worker)": ("cluster.rollout_workers=1", "run.max_staleness=1"),
}
GPU_HEADING = "## Colocated vs disaggregated rollout on GPUs (`nox -s bench_gpu`)"
#: the verdict's bound: a one-step-off step within 10% of max(rollout, update) of the synchronous run
OVERLAP_TARGET = 1.1


def _median(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows[1:] if key in r]
    return statistics.median(values) if values else float("nan")


def _cell(value: float, spec: str) -> str:
    """A table cell: the number, or a dash where the run has no such metric (colocated: no weight sync)."""
    return "—" if math.isnan(value) else format(value, spec)


def overlap_verdict(sync_rows: list[dict], async_rows: list[dict]) -> str:
    """How close the one-step-off step comes to max(rollout, update) of the synchronous run."""
    rollout = _median(sync_rows, "perf/rollout_s")
    update = _median(sync_rows, "perf/reward_s") + _median(sync_rows, "perf/train_s")
    bound = max(rollout, update)
    ratio = _median(async_rows, "perf/step_s") / bound
    met = "meets" if ratio <= OVERLAP_TARGET else "misses"
    return (
        f"One-step-off step / max(rollout {rollout:.3f} s, update {update:.3f} s) of the synchronous "
        f"disaggregated run = **{ratio:.2f}x** ({met} the {OVERLAP_TARGET}x target)."
    )


def gpu_cases(gpus: int) -> dict[str, tuple[str, ...]]:
    """Colocated on every GPU, and the GPUs split between policy and rollout workers (half a GPU each on one)."""
    if gpus < 2:
        share = ("cluster.gpus_per_worker=0.5", "cluster.rollout_gpus_per_worker=0.5", "cluster.rollout_workers=1")
        return {
            "colocated, 1 worker (1 GPU)": ("cluster.gpus_per_worker=1",),
            "disaggregated 1+1 (half a GPU each), staleness 0": share,
            "disaggregated 1+1 (half a GPU each), staleness 1": (*share, "run.max_staleness=1"),
        }
    policy, rollout = gpus - gpus // 2, gpus // 2
    split = (f"cluster.workers={policy}", f"cluster.rollout_workers={rollout}", "cluster.gpus_per_worker=1")
    return {
        f"colocated, {gpus} workers": (f"cluster.workers={gpus}", "cluster.gpus_per_worker=1"),
        f"disaggregated {policy}+{rollout}, staleness 0": split,
        f"disaggregated {policy}+{rollout}, staleness 1": (*split, "run.max_staleness=1"),
    }


#: the GPU runs' settings (overhead.py's GPU setting in shape: Flow-GRPO's SD3.5-Medium recipe, bf16)
GPU_SETS = (
    "model.options.dtype=bfloat16",
    "rollout.options.height=512",
    "rollout.options.width=512",
    "rollout.options.steps=10",
    "rollout.options.cfg=4.5",
    "rollout.options.batch_size=8",
    "optim.micro_batch=4",
    "cluster.cpus_per_worker=2",
)


def step_times(
    steps: int, model_path: str, cases: dict[str, tuple[str, ...]] = CASES, gpus: int = 0, extra: tuple[str, ...] = ()
) -> list[str]:
    import ray

    from omni_rl.testing.runs import run_config

    # CPU runs: 2 CPUs whatever the machine has, so the cases compare on the same budget; GPU runs: every GPU
    cpus = max(2, os.cpu_count() or 2) if gpus else 2
    ray.init(address="local", num_cpus=cpus, num_gpus=gpus, include_dashboard=False, log_to_driver=False)
    example = ROOT / "docs" / "examples" / "sd3_tiny_jpeg.toml"
    common = [
        f"run.steps={steps}",
        "run.save_every=0",
        "cluster.cpus_per_worker=1",
        "data.prompts_per_step=2",
        "log.image_every=0",
        f"model.options.path={model_path}",
        *extra,
    ]
    lines = [
        "| case | step s (median) | rollout s | update s | weight sync s | weight sync bytes |",
        "|---|---|---|---|---|---|",
    ]
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for k, (label, sets) in enumerate(cases.items()):
            rows = runs[label] = run_config(example, Path(tmp) / str(k), [*common, *sets])
            sync = _cell(_median(rows, "perf/weight_sync_s"), ".4f")
            size = _cell(_median(rows, "perf/weight_sync_bytes"), ",.0f")
            update = _median(rows, "perf/reward_s") + _median(rows, "perf/train_s")
            lines.append(
                f"| {label} | {_median(rows, 'perf/step_s'):.3f} | {_median(rows, 'perf/rollout_s'):.3f} | "
                f"{update:.3f} | {sync} | {size} |"
            )
    ray.shutdown()
    sync_label, async_label = list(cases)[1:]
    return [*lines, "", overlap_verdict(runs[sync_label], runs[async_label])]


def gpu_section(steps: int, out: Path) -> list[str]:
    """The GPU rows on overhead.py's SD3.5-Medium-sized model, written as their own section of ``out``."""
    import torch
    from overhead import build_pipeline, cuda_unavailable_reason
    from report import replace_section

    if reason := cuda_unavailable_reason():
        raise SystemExit(f"async_rollout.py --device cuda: {reason}")
    gpus = torch.cuda.device_count()
    name = torch.cuda.get_device_name(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = build_pipeline("sd35m", Path(tmp))
        lines = step_times(steps, str(path), gpu_cases(gpus), gpus, GPU_SETS)
    section = [
        GPU_HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {gpus} x {name}, torch {torch.__version__}: overhead.py's random",
        "SD3.5-Medium-sized model, bf16, 512 px, 2 prompts x 8 images, 10 rollout steps, CFG 4.5; medians of steps",
        f"2-{steps} (`perf/step_s`, `perf/rollout_s`, `perf/reward_s` + `perf/train_s`).",
        "",
        *lines,
    ]
    replace_section(out, GPU_HEADING, "\n".join(section))
    return lines


def val_at_clock(rows: list[dict], seconds: float) -> tuple[int, float]:
    """(step, val reward) of the last evaluation whose training clock is within ``seconds``."""
    from omni_rl.reporting.metrics_reader import training_clock

    clock = training_clock(rows)
    evals = [(r["step"], r["val/reward/mean"]) for r in rows if "val/reward/mean" in r]
    inside = [(s, v) for s, v in evals if clock.get(s, 0.0) <= seconds + 1e-9]
    return inside[-1] if inside else (0, float("nan"))


def shapes_comparison(seeds: list[int], steps: int, keep: Path | None) -> list[str]:
    import ray

    from omni_rl.reporting.metrics_reader import training_clock
    from omni_rl.reporting.run_summary import score_summary
    from omni_rl.testing.runs import run_config

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    example = ROOT / "docs" / "examples" / "shapes_sd3.toml"
    common = [f"run.steps={steps}", "run.save_every=0", "cluster.cpus_per_worker=1", "log.image_every=0"]
    lines = [
        f"| seed | run | base | val at step {steps} | training s | same wall-clock: step | val there "
        "| best val (step) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory() as tmp:
        root = keep or Path(tmp)
        for seed in seeds:
            runs = {
                label: run_config(example, root / f"seed{seed}_{k}", [*common, f"run.seed={seed}", *sets])
                for k, (label, sets) in enumerate(SHAPES_CASES.items())
            }
            trained = {label: training_clock(rows)[rows[-1]["step"]] for label, rows in runs.items()}
            budget = min(trained.values())
            for label, rows in runs.items():
                val = score_summary(rows, "val/reward/mean")  # base, best after it (and its step), final
                at_step, at_clock = val_at_clock(rows, budget)
                lines.append(
                    f"| {seed} | {label} | {val.base:.3f} | {val.final:.3f} | {trained[label]:.0f} | {at_step} "
                    f"| {at_clock:.3f} | {val.best:.3f} ({val.best_step}) |"
                )
    ray.shutdown()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", nargs="?", choices=["steps", "shapes"], default="steps")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default: 6; shapes: 60)")
    parser.add_argument("--model", choices=["tiny", "mid"], default="tiny", help="steps: the SD3 size")
    parser.add_argument("--model-path", default=None, help="steps: any SD3 directory (overrides --model)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="shapes: run.seed values")
    parser.add_argument("--keep", type=Path, default=None, help="shapes: keep the run directories here")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="steps: cuda writes the GPU rows")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md", help="cuda: the report")
    args = parser.parse_args()
    if args.device == "cuda":
        print("\n".join(gpu_section(args.steps or 6, args.out)))
        return
    if args.what == "shapes":
        print("\n".join(shapes_comparison(args.seeds, args.steps or 60, args.keep)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = args.model_path
        if path is None and args.model == "mid":
            from omni_rl_sd3.tiny import build_tiny_sd3_pipeline
            from overhead import SIZES

            path = str(build_tiny_sd3_pipeline(Path(tmp) / "mid", seed=0, **SIZES["mid"].shape))
        print("\n".join(step_times(args.steps or 6, path or str(ROOT / "runs" / "models" / "sd3-tiny"))))


if __name__ == "__main__":
    main()
