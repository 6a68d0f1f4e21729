"""Step time of colocated vs disaggregated rollout, side by side in one Ray session (``nox -s bench_async``).

Three runs of the sd3_tiny_jpeg example on the CPU, the same steps and seeds: colocated with 2 policy workers,
1 policy + 1 rollout worker at ``max_staleness = 0`` and at ``1``. Reports the median ``perf/step_s`` (the first
step left out: start-up), and for the disaggregated runs the median ``perf/weight_sync_s`` and
``perf/weight_sync_bytes`` per step, as a markdown table. ``--model-path`` points at another random SD3
directory (e.g. overhead.py's mid-size one) in place of the example's tiny one.

Not here yet: the shapes val-reward comparison of staleness 0 vs 1 on three seeds (not measured).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

ROOT = Path(__file__).parents[1]
CASES = {
    "colocated, 2 workers": ("cluster.workers=2",),
    "disaggregated 1+1, staleness 0": ("cluster.rollout_workers=1",),
    "disaggregated 1+1, staleness 1": ("cluster.rollout_workers=1", "run.max_staleness=1"),
}


def _run(example: Path, out: Path, sets: list[str]) -> list[dict]:
    from omni_rl.cli import main

    argv = ["run", str(example), *[a for s in [f"run.output_dir={out}", *sets] for a in ("--set", s)]]
    if main(argv) != 0:
        raise SystemExit(f"run failed: {argv}")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def _median(rows: list[dict], key: str) -> float:
    values = [r[key] for r in rows[1:] if key in r]
    return statistics.median(values) if values else float("nan")


def step_times(steps: int, model_path: str) -> list[str]:
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    example = ROOT / "docs" / "examples" / "sd3_tiny_jpeg.toml"
    common = [
        f"run.steps={steps}",
        "run.save_every=0",
        "cluster.cpus_per_worker=1",
        "data.prompts_per_step=2",
        "log.image_every=0",
        f"model.options.path={model_path}",
    ]
    lines = ["| case | step s (median) | weight sync s | weight sync bytes |", "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for k, (label, sets) in enumerate(CASES.items()):
            rows = _run(example, Path(tmp) / str(k), [*common, *sets])
            sync = _median(rows, "perf/weight_sync_s")
            size = _median(rows, "perf/weight_sync_bytes")
            lines.append(f"| {label} | {_median(rows, 'perf/step_s'):.3f} | {sync:.4f} | {size:,.0f} |")
    ray.shutdown()
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--model-path", default=str(ROOT / "runs" / "models" / "sd3-tiny"))
    args = parser.parse_args()
    print("\n".join(step_times(args.steps, args.model_path)))


if __name__ == "__main__":
    main()
