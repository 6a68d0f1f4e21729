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
import subprocess
import sys
import tempfile
import time
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
}


def summarize(metrics_path: Path) -> dict[str, object]:
    """The table's numbers, read as the end-of-run summary and ``omni-rl compare`` read them."""
    from omni_rl.metrics_file import read_metrics, series, training_clock
    from omni_rl.run_summary import score_summary

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
    }
    for gain in (0.1, 0.2):
        hit = next((step for step, value in val if value >= total.base + gain), None)
        out[f"step_{gain}"] = hit
        out[f"s_{gain}"] = clock.get(hit) if hit is not None else None
    return out


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
    "| step to +0.2 | s to +0.2 | train s | wall s |"
)


def _row(name: str, seed: int, r: dict[str, object]) -> str:
    return (
        f"| {name} | `{CONFIGS[name]}` | {seed} | {fmt(r['base'])} | {fmt(r['best'])} ({r['best_step']}) "
        f"| {fmt(r['final'])} | {r['steps']} | {fmt(r['step_0.1'])} | {fmt(r['s_0.1'], '.0f')} "
        f"| {fmt(r['step_0.2'])} | {fmt(r['s_0.2'], '.0f')} | {fmt(r['train_s'], '.0f')} | {fmt(r['wall_s'], '.0f')} |"
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
        "validation excluded); `wall s` is the whole command (start-up, validations, plots).",
        "",
        COLUMNS,
        "|" + "---|" * COLUMNS.count(" | ") + "---|",
    ]
    old = section_of(path.read_text() if path.exists() else "", HEADING)
    kept = _kept_rows(old, rows)
    for key in sorted({*rows, *kept}, key=lambda k: (list(CONFIGS).index(k[0]), k[1])):
        lines.append(_row(*key, rows[key]) if key in rows else kept[key])
    # the means cover every row of the table, kept ones too: a run with --only leaves the other algorithms' lines
    lines += _seed_means({**{k: v for k, line in kept.items() if (v := _gains_of(line))}, **rows})
    notes = _notes_of(old)
    replace_section(path, HEADING, "\n".join([*lines, *(["", notes] if notes else [])]))


def _seed_means(rows: dict[Key, dict[str, object]]) -> list[str]:
    """Per algorithm run on several seeds: the mean gain at the best and at the final evaluation."""
    out = []
    for name in CONFIGS:
        runs = [r for (n, _), r in sorted(rows.items()) if n == name]
        if len(runs) > 1:
            best = sum(float(r["best"]) - float(r["base"]) for r in runs) / len(runs)
            final = sum(float(r["final"]) - float(r["base"]) for r in runs) / len(runs)
            out.append(f"- {name}, mean over {len(runs)} seeds: best − base {best:+.3f}, final − base {final:+.3f}")
    return ["", *out] if out else []


def _gains_of(line: str) -> dict[str, object] | None:
    """``base``, ``best`` and ``final`` of a kept table row (what :func:`_seed_means` reads); None if a cell is not
    a number (an evaluation that did not happen)."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    try:
        return {"base": float(cells[3]), "best": float(cells[4].split()[0]), "final": float(cells[5])}
    except (IndexError, ValueError):
        return None


def _notes_of(section: str) -> str:
    """What was written by hand below the table and its seed means (what each algorithm tried, what mattered):
    kept, so that re-running one algorithm does not erase the findings about the others."""
    lines = section.splitlines()
    if COLUMNS not in lines:
        return ""
    end = lines.index(COLUMNS)
    while end < len(lines) and lines[end].startswith("|"):  # the header, the rule and the rows
        end += 1
    while end < len(lines) and (not lines[end].strip() or _SEED_MEAN.match(lines[end])):
        end += 1
    return "\n".join(lines[end:]).strip("\n")


#: a line :func:`_seed_means` writes
_SEED_MEAN = re.compile(r"^- \w+, mean over \d+ seeds: ")


def _kept_rows(section: str, fresh: dict[Key, dict[str, object]]) -> dict[Key, str]:
    """Table rows of (algorithm, seed) pairs not re-run this time (``--only``, ``--seeds``), kept as they were."""
    kept: dict[Key, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) > 2 and cells[0] in CONFIGS and cells[2].isdigit():
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
    parser.add_argument("--set", action="append", default=[], help="extra overrides for every run")
    parser.add_argument("--keep", help="write the run directories here (kept) instead of a temporary directory")
    args = parser.parse_args()
    extra = [a for s in args.set for a in ("--set", s)]
    rows: dict[Key, dict[str, object]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.keep) if args.keep else Path(tmp)
        for name in args.only:
            if not (ROOT / CONFIGS[name]).exists():
                print(f"skipping {name}: {CONFIGS[name]} does not exist")
                continue
            for seed in args.seeds:
                seeded = [*extra, "--set", f"run.seed={seed}"]
                rows[name, seed] = run(f"{name}_seed{seed}", CONFIGS[name], workdir, seeded, args.threads)
                print(name, seed, rows[name, seed], flush=True)
    write_report(Path(args.out), rows, args.threads)


if __name__ == "__main__":
    main()
