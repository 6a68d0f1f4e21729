"""What every GPU run must show (issue 28): the first step's on-policy ratio is 1 within its dtype's tolerance,
every loss is finite, the LoRA gradient is not zero, and the run exits 0 (the caller asserts that)."""

from __future__ import annotations

import json
import math
import os
from typing import Any

#: the largest |ratio − 1| allowed at the first step, where the weights did not change between sampling and the
#: recompute. float32 differs only by the GEMM tiling of another batch size (the rollout's ``batch_size`` against
#: the update's ``micro_batch``); bfloat16 compute (a bf16 rollout, FSDP2's bf16 mixed precision) rounds the
#: velocity to 8 bits, which the log-density divides by σ². Measured on an H200 (docs/benchmarks.md, GPU suite):
#: at most 1.2e-7 in float32 and 4.5e-5 with a bf16 rollout, so both bounds keep a margin of about 200x or more.
RATIO_TOLERANCE = {"float32": 1e-4, "bfloat16": 1e-2}


def first_step_ratio_deviation(rows: list[dict[str, Any]]) -> float | None:
    """max |ratio − 1| over the first step's recomputed window steps (exp of the logged max |δ|), None when the
    run has no per-step log-probs (forward-process losses: DPO, DiffusionNFT, AWM)."""
    delta = rows[0].get("rollout_corr/abs_delta_max")
    return None if delta is None else math.expm1(float(delta))


def check_rows(rows: list[dict[str, Any]], steps: int, dtype: str = "float32") -> dict[str, Any]:
    """Assert the run's health and return what it measured (for the report)."""
    assert [r["step"] for r in rows] == list(range(1, steps + 1)), [r["step"] for r in rows]
    for row in rows:
        loss = row.get("actor/loss")
        assert loss is not None and math.isfinite(loss), f"step {row['step']}: loss {loss}"
        grad = row.get("actor/grad_norm")
        assert grad is not None and math.isfinite(grad) and grad > 0, f"step {row['step']}: LoRA grad norm {grad}"
        assert row.get("actor/skipped_steps", 0) == 0, f"step {row['step']}: a non-finite gradient was skipped"
    deviation = first_step_ratio_deviation(rows)
    if deviation is not None:
        tolerance = RATIO_TOLERANCE[dtype]
        assert deviation <= tolerance, f"first-step on-policy ratio off by {deviation:.3g} (> {tolerance}, {dtype})"
    return {
        "ratio_deviation": deviation,
        "grad_norm": rows[0]["actor/grad_norm"],
        "loss": rows[0]["actor/loss"],
        "step_s": [r.get("perf/step_s") for r in rows],
        "images_per_s": [r.get("perf/images_per_s") for r in rows],
    }


def report(case: str, values: dict[str, Any]) -> None:
    """Append what a case measured to ``OMNI_RL_GPU_REPORT`` (a JSON-lines file), when set: the first-step
    ratio deviations and step times that docs/benchmarks.md quotes."""
    path = os.environ.get("OMNI_RL_GPU_REPORT")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"case": case, **values}) + "\n")


def rehearsal() -> bool:
    """``OMNI_RL_GPU_SUITE_ON_CPU=1``: run the suite's cases on the CPU (GPU requests become 0) to check the
    suite itself before spending GPU time; nothing it measures there is a GPU result."""
    return os.environ.get("OMNI_RL_GPU_SUITE_ON_CPU") == "1"


def on_this_machine(sets: tuple[str, ...] | list[str]) -> list[str]:
    """``sets`` as given, or in a rehearsal with every GPU request set to 0 and the CUDA-only speed options off."""
    if not rehearsal():
        return list(sets)
    out = []
    for s in sets:
        key = s.split("=", 1)[0]
        if key in ("cluster.gpus_per_worker", "cluster.rollout_gpus_per_worker"):
            s = f"{key}=0"
        if key == "cluster.mixed_precision":
            s = 'cluster.mixed_precision="no"'
        if key == "model.options.cuda_graphs":  # CUDA-only: refused on a CPU worker
            s = f"{key}=false"
        if key == "model.options.attention_backend":  # the fused kernels are CUDA-only
            s = f'{key}="default"'
        out.append(s)
    return out
