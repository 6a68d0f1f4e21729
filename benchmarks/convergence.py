"""Convergence on the shapes benchmark (`nox -s convergence`): does each algorithm learn, and how fast?

Runs each example config as is (fixed seeds) through `omni-rl run`, then reads its metrics.jsonl: the val reward
before training (step 0) and at the end, and the first step (and wall-clock seconds of training) at which the val
reward is at least +0.1 and +0.2 above the base. Writes the table to docs/benchmarks.md. ``--seeds 0 1 2`` runs
each config on several seeds (``run.seed`` also draws the val seeds): one seed's gain can be its base reading.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from report import cpu_name, replace_section, section_of

ROOT = Path(__file__).parents[1]
HEADING = "## Convergence on shapes (`nox -s convergence`)"
CONFIGS = {
    "flow_grpo": "docs/examples/quickstart.toml",
    "flow_grpo_sd3": "docs/examples/shapes_sd3.toml",
    "dpo": "docs/examples/shapes_dpo.toml",
    "diffusion_nft": "docs/examples/shapes_diffusion_nft.toml",
    "awm": "docs/examples/shapes_awm.toml",
    "mix_grpo": "docs/examples/shapes_mix_grpo.toml",
    "dance_grpo": "docs/examples/shapes_dance_grpo.toml",
    "grpo_guard": "docs/examples/shapes_grpo_guard.toml",
    "flow_dppo": "docs/examples/shapes_flow_dppo.toml",
    # text-to-video: Flow-GRPO on the shapes-in-motion Wan model (omni-rl-shapes-motion), the shapes_motion reward
    "shapes_motion": "docs/examples/shapes_motion.toml",
    # image editing: Flow-GRPO and DiffusionNFT on the shapes edit Qwen-Image-Edit model (omni-rl-shapes-edit)
    "shapes_edit": "docs/examples/shapes_edit.toml",
    "shapes_edit_nft": "docs/examples/shapes_edit_nft.toml",
}


def summarize(metrics_path: Path) -> dict[str, object]:
    """The table's numbers, read as the end-of-run summary and ``omni-rl compare`` read them."""
    from omni_rl.reporting.metrics_reader import read_metrics, series, training_clock
    from omni_rl.reporting.run_summary import score_summary

    rows = read_metrics(metrics_path)
    clock = training_clock(rows)
    val = list(zip(*series(rows, "val/reward/mean"), strict=True))
    if not val:
        raise SystemExit(f"{metrics_path}: no val/reward/mean rows (set eval_every and eval_before_training)")
    total = score_summary(rows, "val/reward/mean")
    out: dict[str, object] = {
        "base": total.base,
        "final": total.final,
        "best": total.best,
        "best_step": total.best_step,
        "steps": rows[-1]["step"],
        "train_s": clock[rows[-1]["step"]],
        "wall_s": None,
        "images_per_s": _training_images_per_s(rows, clock[rows[-1]["step"]]),
    }
    for gain in (0.1, 0.2):
        hit = next((step for step, value in val if value >= total.base + gain), None)
        out[f"step_{gain}"] = hit
        out[f"s_{gain}"] = clock.get(hit) if hit is not None else None
    return out


def _training_images_per_s(rows: list[dict[str, object]], train_s: float) -> float | None:
    """Images sampled per second of training (rollout, reward and update together, validation excluded): what an
    algorithm's whole step costs per image, where ``perf/images_per_s`` is the rollout's speed alone. A step's
    image count is that rate times its rollout seconds (the trainer divides the one by the other)."""
    images = sum(
        float(row["perf/images_per_s"]) * float(row["perf/rollout_s"])  # type: ignore[arg-type]
        for row in rows
        if row.get("perf/images_per_s") is not None and row.get("perf/rollout_s") is not None
    )
    return images / train_s if images and train_s > 0 else None


def run(name: str, config: str, workdir: Path, extra: list[str], threads: int) -> dict[str, object]:
    out = workdir / name
    cmd = [sys.executable, "-m", "omni_rl.cli", "run", str(ROOT / config), "--set", f"run.output_dir={out}", *extra]
    # the policy worker's torch threads: fixed and recorded, so the seconds in the table mean the same thing
    env = {**os.environ, "OMNI_RL_TORCH_THREADS": str(threads)}
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT, env=env)
    result = summarize(out / "metrics.jsonl")
    result["wall_s"] = time.perf_counter() - start
    return result


def fmt(value: object, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec) if isinstance(value, float) else str(value)


#: one table row per (algorithm, seed)
Key = tuple[str, int]

COLUMNS = (
    "| algorithm | config | seed | base val | best val (step) | final val | steps | step to +0.1 | s to +0.1 "
    "| step to +0.2 | s to +0.2 | train s | wall s | images/s |"
)


def _row(name: str, seed: int, r: dict[str, object]) -> str:
    return (
        f"| {name} | `{CONFIGS[name]}` | {seed} | {fmt(r['base'])} | {fmt(r['best'])} ({r['best_step']}) "
        f"| {fmt(r['final'])} | {r['steps']} | {fmt(r['step_0.1'])} | {fmt(r['s_0.1'], '.0f')} "
        f"| {fmt(r['step_0.2'])} | {fmt(r['s_0.2'], '.0f')} | {fmt(r['train_s'], '.0f')} | {fmt(r['wall_s'], '.0f')} "
        f"| {fmt(r.get('images_per_s'), '.2f')} |"
    )


def write_report(path: Path, rows: dict[Key, dict[str, object]], threads: int | None = None) -> None:
    used = f"{threads} torch thread(s) per run" if threads else f"{os.cpu_count()} CPU threads"
    machine = f"{cpu_name()} ({platform.machine()}, {os.cpu_count()} CPUs), {used}, Python {platform.python_version()}"
    lines = [
        HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {machine}; each example config as is, `run.seed` as listed (it",
        "also draws the val seeds). Val reward: ODE sampling with fixed seeds on the held-out val prompts; best val is",
        "the highest evaluation after step 0. `s to` and `train s` are training wall-clock (summed step times,",
        "validation excluded); `wall s` is the whole command (start-up, validations, plots); `images/s` is images",
        "sampled per second of training. The comparison averages each algorithm's rows (mean ± sd over its seeds;",
        "`s to` over the seeds that got there, with how many did).",
        "",
    ]
    old = section_of(path.read_text() if path.exists() else "", HEADING)
    kept = _kept_rows(old, rows)
    # the comparison covers every row of the table, kept ones too: a run with --only keeps the others' numbers
    lines += _comparison({**{k: v for k, line in kept.items() if (v := _cells_of(line))}, **rows})
    lines += ["", COLUMNS, "|" + "---|" * COLUMNS.count(" | ") + "---|"]
    for key in sorted({*rows, *kept}, key=lambda k: (list(CONFIGS).index(k[0]), k[1])):
        lines.append(_row(*key, rows[key]) if key in rows else kept[key])
    notes = _notes_of(old)
    replace_section(path, HEADING, "\n".join([*lines, *(["", notes] if notes else [])]))


COMPARISON = "| algorithm | seeds | steps | base val | best − base | final − base | s to +0.1 | s to +0.2 | images/s |"


def _mean_sd(values: list[float], spec: str) -> str:
    """``mean ± sd`` (the sample sd, n − 1), or the value alone for one seed, or — for none."""
    if len(values) < 2:
        return format(values[0], spec) if values else "—"
    return f"{format(statistics.mean(values), spec)} ± {format(statistics.stdev(values), spec.lstrip('+'))}"


def _comparison(rows: dict[Key, dict[str, object]]) -> list[str]:
    """One row per algorithm: what a user picks an algorithm from (issue 32), averaged over its seeds."""
    out = [COMPARISON, "|" + "---|" * COMPARISON.count(" | ") + "---|"]
    for name in CONFIGS:
        runs = [r for (n, _), r in sorted(rows.items()) if n == name]
        if not runs:
            continue
        seeds = [seed for (n, seed) in sorted(rows) if n == name]
        steps = sorted({int(r["steps"]) for r in runs})  # type: ignore[call-overload]
        cells = [
            name,
            ", ".join(map(str, seeds)),
            "/".join(map(str, steps)),  # more than one: rows of different budgets (said in the notes)
            _mean_sd([float(r["base"]) for r in runs], ".3f"),  # type: ignore[arg-type]
            _mean_sd([float(r["best"]) - float(r["base"]) for r in runs], "+.3f"),  # type: ignore[arg-type]
            _mean_sd([float(r["final"]) - float(r["base"]) for r in runs], "+.3f"),  # type: ignore[arg-type]
        ]
        for gain in ("0.1", "0.2"):
            hits = [float(r[f"s_{gain}"]) for r in runs if r.get(f"s_{gain}") is not None]  # type: ignore[arg-type]
            cells.append(f"{_mean_sd(hits, '.0f')} ({len(hits)}/{len(runs)})")
        rates = [float(r["images_per_s"]) for r in runs if r.get("images_per_s") is not None]  # type: ignore[arg-type]
        cells.append(_mean_sd(rates, ".2f"))
        out.append("| " + " | ".join(cells) + " |")
    return out


def _cells_of(line: str) -> dict[str, object] | None:
    """What :func:`_comparison` reads of a kept table row; None if base, best or final is not a number (an
    evaluation that did not happen). A row written before the images/s column has none."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]

    def number(index: int) -> float | None:
        try:
            return float(cells[index])
        except (IndexError, ValueError):
            return None

    try:
        gains = {"base": float(cells[3]), "best": float(cells[4].split()[0]), "final": float(cells[5])}
        steps = int(cells[6])
    except (IndexError, ValueError):
        return None
    return {**gains, "steps": steps, "s_0.1": number(8), "s_0.2": number(10), "images_per_s": number(13)}


def _notes_of(section: str) -> str:
    """What was written by hand below the table and its seed means (what each algorithm tried, what mattered):
    kept, so that re-running one algorithm does not erase the findings about the others."""
    lines = section.splitlines()
    end = next((i for i, line in enumerate(lines) if _is_per_seed_header(line)), None)
    if end is None:
        return ""
    while end < len(lines) and lines[end].startswith("|"):  # the header, the rule and the rows
        end += 1
    while end < len(lines) and (not lines[end].strip() or _SEED_MEAN.match(lines[end])):
        end += 1
    return "\n".join(lines[end:]).strip("\n")


#: a seed-mean line of the reports written before the comparison table replaced them (dropped on a rewrite)
_SEED_MEAN = re.compile(r"^- \w+, mean over \d+ seeds: ")


def _is_per_seed_header(line: str) -> bool:
    """The per-seed table's header, also as written before it had an images/s column."""
    return line.startswith(COLUMNS.split(" | step to")[0])


def _kept_rows(section: str, fresh: dict[Key, dict[str, object]]) -> dict[Key, str]:
    """Table rows of (algorithm, seed) pairs not re-run this time (``--only``, ``--seeds``), kept as they were."""
    kept: dict[Key, str] = {}
    in_table = False  # the comparison table above it has one row per algorithm, not per seed
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if _is_per_seed_header(line):
            in_table = True
        elif in_table and line.startswith("| ") and len(cells) > 2 and cells[0] in CONFIGS and cells[2].isdigit():
            key = (cells[0], int(cells[2]))
            if key not in fresh:
                kept[key] = line
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--only", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0], help="run.seed values, one run each")
    parser.add_argument("--threads", type=int, default=min(2, os.cpu_count() or 1), help="torch threads per run")
    parser.add_argument(
        "--jobs", type=int, default=1, help="runs at a time (the table's rows: 2 at a time on 2 cores, --threads 1)"
    )
    parser.add_argument("--set", action="append", default=[], help="extra overrides for every run")
    parser.add_argument("--keep", help="write the run directories here (kept) instead of a temporary directory")
    args = parser.parse_args()
    extra = [a for s in args.set for a in ("--set", s)]
    rows: dict[Key, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        workdir = Path(args.keep) if args.keep else Path(tmp)
        running = {}
        for name in args.only:
            if not (ROOT / CONFIGS[name]).exists():
                print(f"skipping {name}: {CONFIGS[name]} does not exist")
                continue
            for seed in args.seeds:
                seeded = [*extra, "--set", f"run.seed={seed}"]
                job = pool.submit(run, f"{name}_seed{seed}", CONFIGS[name], workdir, seeded, args.threads)
                running[job] = (name, seed)
        for job in as_completed(running):  # a failed run stops the report: no table with a row missing unsaid
            rows[running[job]] = job.result()
            print(*running[job], rows[running[job]], flush=True)
    write_report(Path(args.out), rows, args.threads)


if __name__ == "__main__":
    main()
