"""The hook specifications: one hook per component kind, nothing else.

Each hook takes no arguments and returns an iterable of spec records of its kind. Implementations live in a
plugin's ``hooks.py`` and must import in milliseconds: heavy imports (torch, diffusers) go inside factories.
"""

from __future__ import annotations

from collections.abc import Iterable

import pluggy

from omni_rl.specs import (
    AdvantageSpec,
    AlgorithmSpec,
    BenchmarkSpec,
    LossSpec,
    ModelSpec,
    RewardSpec,
    RolloutSpec,
    SamplerSpec,
)

PROJECT_NAME = "omni_rl"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def omni_rl_models() -> Iterable[ModelSpec]:
    """Model architecture adapters (``[model] name``)."""


@hookspec
def omni_rl_samplers() -> Iterable[SamplerSpec]:
    """Reverse-step samplers with log-probs (``[sampler] name``)."""


@hookspec
def omni_rl_rollout_backends() -> Iterable[RolloutSpec]:
    """Rollout backends (``[rollout] name``)."""


@hookspec
def omni_rl_reward_models() -> Iterable[RewardSpec]:
    """Reward models (``[[reward]] name``)."""


@hookspec
def omni_rl_advantage_estimators() -> Iterable[AdvantageSpec]:
    """Advantage estimators (``[advantage] name``)."""


@hookspec
def omni_rl_losses() -> Iterable[LossSpec]:
    """Policy losses (``[loss] name``)."""


@hookspec
def omni_rl_algorithms() -> Iterable[AlgorithmSpec]:
    """Algorithm presets (``[algorithm] name``) that fill defaults for the other sections."""


@hookspec
def omni_rl_benchmarks() -> Iterable[BenchmarkSpec]:
    """Evaluation benchmarks (``omni-rl eval --benchmark NAME``): a prompt set, its scorer and its report."""
