"""The overhead benchmark's sections of docs/benchmarks.md, verdict included.

Each run rewrites only its own section (``CPU_HEADING`` for ``nox -s bench``, ``GPU_HEADING`` for
``nox -s bench_gpu``) and leaves every other section as it was. The pass/fail sentence against the 10% target is
computed here from the measured ratios: a hand-written verdict would go stale, or vanish, at the next run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from report import replace_section

#: the framework may add at most this fraction over the bare compute (issue 3's target)
TARGET = 0.10
CPU_HEADING = "## Framework overhead (`nox -s bench`)"
GPU_HEADING = "## One GPU: SD3.5-Medium-sized model (`nox -s bench_gpu`)"


@dataclass(frozen=True)
class Timing:
    """Median seconds of one model size: the framework and the bare loop, for the rollout and the update."""

    label: str
    #: images per rollout (prompts x group size)
    images: int
    #: trained (SDE window) steps per sample in the update
    trained_steps: int
    rollout_framework_s: float
    rollout_bare_s: float
    update_framework_s: float
    update_bare_s: float
    #: peak GPU memory over the measured runs (None on CPU)
    peak_memory_gib: float | None = None
    #: diffusers' own pipeline call on the same model and settings (None where not measured)
    diffusers_rollout_s: float | None = None
    #: transformer FLOPs of one rollout and one update (benchmarks/flops.py), for MFU
    rollout_flops: float | None = None
    update_flops: float | None = None

    @property
    def vs_diffusers(self) -> float | None:
        """The rollout's images/s over diffusers' pipeline images/s (1.0 = as fast)."""
        return None if self.diffusers_rollout_s is None else self.diffusers_rollout_s / self.rollout_framework_s

    @property
    def rollout_ratio(self) -> float:
        return self.rollout_framework_s / self.rollout_bare_s

    @property
    def update_ratio(self) -> float:
        return self.update_framework_s / self.update_bare_s

    @property
    def images_per_s(self) -> float:
        """Rollout throughput through the framework (what a training run gets)."""
        return self.images / self.rollout_framework_s

    @property
    def update_ms_per_sample_step(self) -> float:
        """Framework update time per sample x trained step: scales the update to other batch and window sizes."""
        return 1000 * self.update_framework_s / (self.images * self.trained_steps)


def verdict_lines(timings: Sequence[Timing], target: float = TARGET) -> list[str]:
    """One sentence saying whether every framework / bare ratio is within ``1 + target``, naming any that is not."""
    ratios = [(t.label, "rollout", t.rollout_ratio) for t in timings]
    ratios += [(t.label, "update", t.update_ratio) for t in timings]
    if not ratios:
        return []
    over = [(label, part, ratio) for label, part, ratio in ratios if ratio > 1 + target]
    if over:
        named = "; ".join(f"{label} {part} {ratio:.3f}" for label, part, ratio in over)
        lines = [f"**Verdict: over the {target:.0%} target** (framework / bare > {1 + target:.2f}): {named}."]
    else:
        lines = [f"**Verdict: every ratio is within the {target:.0%} target** (framework / bare <= {1 + target:.2f})."]
    if any(ratio < 1 for _, _, ratio in ratios):
        lines.append("A ratio below 1 is timing noise: both sides run the same compute.")
    return lines


@dataclass(frozen=True)
class Scaling:
    """Median training-step seconds per number of CPU policy workers, and what the step was."""

    description: str
    step_s: Mapping[int, float]


def cpu_section(timings: Sequence[Timing], scaling: Scaling | None, context: Sequence[str]) -> str:
    """The ``nox -s bench`` section: the overhead table, the verdict, the 1 vs 2 CPU worker scaling table."""
    lines = [CPU_HEADING, "", *context, ""]
    lines += [
        "| model | rollout: omni-rl s | bare s | ratio | diffusers s | omni-rl ÷ diffusers images/s "
        "| update: omni-rl s | bare s | ratio | images/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in timings:
        diffusers = "—" if t.diffusers_rollout_s is None else f"{t.diffusers_rollout_s:.3f}"
        vs = "—" if t.vs_diffusers is None else f"{t.vs_diffusers:.3f}"
        lines.append(
            f"| {t.label} | {t.rollout_framework_s:.3f} | {t.rollout_bare_s:.3f} | {t.rollout_ratio:.3f} "
            f"| {diffusers} | {vs} "
            f"| {t.update_framework_s:.3f} | {t.update_bare_s:.3f} | {t.update_ratio:.3f} | {t.images_per_s:.1f} |"
        )
    lines += ["", *verdict_lines(timings), ""]
    if any(t.diffusers_rollout_s is not None for t in timings):
        lines += [
            "diffusers: the pipeline's own call on the same model, prompts, steps, CFG and size (every image in one "
            "call, plain ODE sampling without log-probs); omni-rl ÷ diffusers above 1 means the framework's "
            "rollout, trajectory and log-probs included, makes images faster than the library users would "
            "otherwise run.",
            "",
        ]
    if scaling:
        lines += [scaling.description, "", "| workers | step s | speed-up |", "|---|---|---|"]
        base = scaling.step_s[min(scaling.step_s)]
        lines += [f"| {n} | {seconds:.2f} | {base / seconds:.2f}x |" for n, seconds in scaling.step_s.items()]
    else:
        lines.append("Scaling (1 vs 2 CPU workers): not measured in this run (`--no-scaling`).")
    return "\n".join(lines)


def _mfu(flops: float | None, seconds: float | None, peak: float | None) -> str:
    if flops is None or seconds is None or peak is None:
        return "—"
    return f"{100 * flops / seconds / peak:.0f}%"


def gpu_section(timings: Sequence[Timing], context: Sequence[str], peak_flops: float | None = None) -> str:
    """The ``nox -s bench_gpu`` section: images/s and update time on one GPU, with the ratios and the verdict,
    then the rollout against diffusers' own pipeline call and each side's MFU (``peak_flops``: the GPU's dense bf16
    FLOP/s)."""
    lines = [GPU_HEADING, "", *context, ""]
    lines += [
        "| model | images/s | rollout: omni-rl s | bare s | ratio | update: omni-rl s | bare s | ratio "
        "| update ms per sample x step | peak GiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for t in timings:
        peak = "—" if t.peak_memory_gib is None else f"{t.peak_memory_gib:.1f}"
        lines.append(
            f"| {t.label} | {t.images_per_s:.2f} | {t.rollout_framework_s:.3f} | {t.rollout_bare_s:.3f} "
            f"| {t.rollout_ratio:.3f} | {t.update_framework_s:.3f} | {t.update_bare_s:.3f} | {t.update_ratio:.3f} "
            f"| {t.update_ms_per_sample_step:.1f} | {peak} |"
        )
    lines += ["", *verdict_lines(timings)]
    anchored = [t for t in timings if t.diffusers_rollout_s is not None]
    if anchored:
        lines += [
            "",
            "Against diffusers' own pipeline call on the same model (`pipe(prompts, num_images_per_prompt=..., "
            "num_inference_steps=..., guidance_scale=...)`, same LoRA'd transformer, dtype, prompts, steps, CFG "
            "and size), and model FLOPs utilisation of the transformer work (benchmarks/flops.py; text encoders "
            "and VAE not counted):",
            "",
            "| model | omni-rl images/s | diffusers images/s | omni-rl ÷ diffusers | rollout MFU omni-rl "
            "| rollout MFU diffusers | update MFU |",
            "|---|---|---|---|---|---|---|",
        ]
        for t in anchored:
            assert t.diffusers_rollout_s is not None and t.vs_diffusers is not None
            lines.append(
                f"| {t.label} | {t.images_per_s:.2f} | {t.images / t.diffusers_rollout_s:.2f} | {t.vs_diffusers:.3f} "
                f"| {_mfu(t.rollout_flops, t.rollout_framework_s, peak_flops)} "
                f"| {_mfu(t.rollout_flops, t.diffusers_rollout_s, peak_flops)} "
                f"| {_mfu(t.update_flops, t.update_framework_s, peak_flops)} |"
            )
    return "\n".join(lines)


def write_report(path: Path, section: str) -> None:
    """Replace the section ``section`` starts with (CPU or GPU) in ``path``; every other section is kept."""
    heading = section.splitlines()[0]
    if heading not in (CPU_HEADING, GPU_HEADING):
        raise ValueError(f"not an overhead section heading: {heading!r}")
    replace_section(path, heading, section)
