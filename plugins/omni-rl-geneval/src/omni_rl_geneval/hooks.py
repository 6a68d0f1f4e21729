"""Hook implementations of omni-rl-geneval: the ``geneval`` reward and the ``geneval`` benchmark.

Imports only the option class (attrs); torch, transformers, the scorer and the preflight check (huggingface_hub)
load inside the functions the records name.
"""

from __future__ import annotations

from typing import Any

from omni_rl import BenchmarkSpec, RewardSpec, hookimpl
from omni_rl_geneval.config import GenEvalConfig


def _build_reward(config: GenEvalConfig, ctx: Any) -> Any:
    from omni_rl_geneval.reward import build_geneval_reward

    return build_geneval_reward(config, ctx)


def _preflight(component: Any, prompts: Any) -> list[str]:
    from omni_rl_geneval.preflight import geneval_preflight

    return geneval_preflight(component, prompts)


def _build_benchmark(config: GenEvalConfig, ctx: Any) -> Any:
    from omni_rl_geneval.benchmark import build_geneval_benchmark

    return build_geneval_benchmark(config, ctx)


@hookimpl
def omni_rl_reward_models() -> list[RewardSpec]:
    return [
        RewardSpec(
            name="geneval",
            factory=_build_reward,
            config=GenEvalConfig,
            preflight=_preflight,  # `omni-rl check`: models loadable here (offline: cached), prompts with metadata
            summary="GenEval (Mask2Former + CLIP colour): fraction of the prompt's requirements met; strict 0/1 "
            "and per-tag details; needs GenEval metadata per prompt (.jsonl)",
        )
    ]


@hookimpl
def omni_rl_benchmarks() -> list[BenchmarkSpec]:
    return [
        BenchmarkSpec(
            name="geneval",
            factory=_build_benchmark,
            config=GenEvalConfig,
            summary="GenEval: 553 prompts x 4 images, six tags, overall = mean over tags (Ghosh et al. 2023)",
        )
    ]
