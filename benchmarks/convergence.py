"""Convergence on the shapes benchmark (`nox -s convergence`): does each algorithm learn, and how fast?

Runs each example config as is (fixed seeds) through `omni-rl run`, then reads its metrics.jsonl: the val reward
before training (step 0) and at the end, and the first step (and wall-clock seconds of training) at which the val
reward is at least +0.1 and +0.2 above the base. Writes the table to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from report import replace_section, section_of

ROOT = Path(__file__).parents[1]
HEADING = "## Convergence on shapes (`nox -s convergence`)"
CONFIGS = {
    "flow_grpo": "docs/examples/quickstart.toml",
    "dpo": "docs/examples/shapes_dpo.toml",
    "diffusion_nft": "docs/examples/shapes_diffusion_nft.toml",
    "awm": "docs/examples/shapes_awm.toml",
}


def summarize(metrics_path: Path) -> dict[str, object]:
    rows = sorted((json.loads(line) for line in metrics_path.read_text().splitlines()), key=lambda r: r["step"])
    elapsed, clock = 0.0, {}
    for row in rows:
        elapsed += row.get("perf/step_s") or 0.0
        clock[row["step"]] = elapsed
    val = [(row["step"], row["val/reward/mean"]) for row in rows if row.get("val/reward/mean") is not None]
    if not val:
        raise SystemExit(f"{metrics_path}: no val/reward/mean rows (set eval_every and eval_before_training)")
    base, final = val[0][1], val[-1][1]
    out: dict[str, object] = {"base": base, "final": final, "steps": rows[-1]["step"], "train_s": elapsed}
    for gain in (0.1, 0.2):
        hit = next((step for step, value in val if value >= base + gain), None)
        out[f"step_{gain}"] = hit
        out[f"s_{gain}"] = clock.get(hit) if hit is not None else None
    return out


def run(name: str, config: str, workdir: Path, extra: list[str]) -> dict[str, object]:
    out = workdir / name
    cmd = [sys.executable, "-m", "omni_rl.cli", "run", str(ROOT / config), "--set", f"run.output_dir={out}", *extra]
    start = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT)
    result = summarize(out / "metrics.jsonl")
    result["wall_s"] = time.perf_counter() - start
    return result


def fmt(value: object, spec: str = ".3f") -> str:
    return "—" if value is None else format(value, spec) if isinstance(value, float) else str(value)


def write_report(path: Path, rows: dict[str, dict[str, object]]) -> None:
    machine = f"{platform.machine()}, {os.cpu_count()} CPU threads, Python {platform.python_version()}"
    lines = [
        HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {machine}; each example config as is, fixed seeds.",
        "Val reward: ODE sampling with fixed seeds on the held-out val prompts. Seconds are training wall-clock",
        "(summed step times, validation excluded).",
        "",
        "| algorithm | config | base val | final val | steps | step to +0.1 | s to +0.1 | step to +0.2 | s to +0.2 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    kept = _kept_rows(section_of(path.read_text() if path.exists() else "", HEADING), rows)
    for name in CONFIGS:
        if name in rows:
            r = rows[name]
            lines.append(
                f"| {name} | `{CONFIGS[name]}` | {fmt(r['base'])} | {fmt(r['final'])} | {r['steps']} "
                f"| {fmt(r['step_0.1'])} | {fmt(r['s_0.1'], '.0f')} | {fmt(r['step_0.2'])} | {fmt(r['s_0.2'], '.0f')} |"
            )
        elif name in kept:
            lines.append(kept[name])
    replace_section(path, HEADING, "\n".join(lines))


def _kept_rows(section: str, fresh: dict[str, dict[str, object]]) -> dict[str, str]:
    """Table rows of algorithms not re-run this time (``--only``), kept as they were rather than dropped."""
    kept = {}
    for line in section.splitlines():
        name = line.strip().strip("|").split("|")[0].strip()
        if line.startswith("| ") and name in CONFIGS and name not in fresh:
            kept[name] = line
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    parser.add_argument("--only", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--set", action="append", default=[], help="extra overrides for every run")
    parser.add_argument("--keep", help="write the run directories here (kept) instead of a temporary directory")
    args = parser.parse_args()
    extra = [a for s in args.set for a in ("--set", s)]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(args.keep) if args.keep else Path(tmp)
        for name in args.only:
            if not (ROOT / CONFIGS[name]).exists():
                print(f"skipping {name}: {CONFIGS[name]} does not exist")
                continue
            rows[name] = run(name, CONFIGS[name], workdir, extra)
            print(name, rows[name], flush=True)
    write_report(Path(args.out), rows)


if __name__ == "__main__":
    main()
