"""Sources of fake installed plugin distributions, and running the real ``omni-rl`` command against them.

The hooks modules here import only omni_rl and attrs (no torch), like a well-behaved plugin, so each CLI
subprocess starts in well under a second.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from omni_rl.plugins import DISABLE_ENV, LOAD_ENV

#: Every kind with one record; ``factory`` is never called by `plugins` or `check`.
LIGHT_HOOKS = """
import attrs

from omni_rl import (
    AdvantageSpec, AlgorithmSpec, LossSpec, ModelSpec, RewardSpec, RolloutSpec, SamplerSpec, hookimpl,
)


@attrs.frozen(kw_only=True)
class Options:
    size: int = attrs.field(default=4, validator=attrs.validators.gt(0))
    label: str = "x"


def _factory(config, ctx):
    return config


@hookimpl
def omni_rl_models():
    return [ModelSpec(name="toy", factory=_factory, config=Options, summary="toy model")]


@hookimpl
def omni_rl_samplers():
    return [SamplerSpec(name="toy_sde", factory=_factory, config=Options, summary="toy sampler")]


@hookimpl
def omni_rl_rollout_backends():
    return [RolloutSpec(name="toy_rollout", factory=_factory, config=Options, summary="toy rollout")]


@hookimpl
def omni_rl_reward_models():
    return [RewardSpec(name="toy_brightness", factory=_factory, config=Options, summary="toy reward")]


@hookimpl
def omni_rl_advantage_estimators():
    return [AdvantageSpec(name="toy_grpo", factory=_factory, config=Options, summary="toy advantage")]


@hookimpl
def omni_rl_losses():
    return [LossSpec(name="toy_ppo", factory=_factory, config=Options, summary="toy loss")]


@hookimpl
def omni_rl_algorithms():
    defaults = {
        "sampler": {"name": "toy_sde", "options": {"size": 2}},
        "rollout": {"name": "toy_rollout"},
        "advantage": {"name": "toy_grpo"},
        "loss": {"name": "toy_ppo", "options": {"label": "preset"}},
    }
    return [AlgorithmSpec(name="toy_preset", defaults=defaults, summary="toy preset")]
"""

#: A second distribution that also provides loss 'toy_ppo' (and a sampler whose alias clashes).
CONFLICTING_HOOKS = """
from omni_rl import LossSpec, SamplerSpec, hookimpl


def _factory(config, ctx):
    return config


@hookimpl
def omni_rl_losses():
    return [LossSpec(name="toy_ppo", factory=_factory, summary="another toy loss")]


@hookimpl
def omni_rl_samplers():
    return [SamplerSpec(name="other_sde", factory=_factory, aliases=("toy_sde",), summary="another sampler")]
"""

#: A plugin whose hooks module cannot be imported.
BROKEN_HOOKS = """
import omni_rl_missing_dependency  # not installed anywhere
"""

#: A config using LIGHT_HOOKS' names: model and reward explicit, the rest from the preset.
LIGHT_CONFIG = """\
[run]
steps = 3

[algorithm]
name = "toy_preset"

[model]
name = "toy"
options = { size = 8 }

[[reward]]
name = "toy_brightness"
"""


def with_prompts(config: str, directory: Path) -> str:
    """``config`` plus a ``[data]`` section whose train prompts file exists (`omni-rl check` reads it)."""
    prompts = directory / "train_prompts.txt"
    prompts.write_text("a red circle\na blue square\n")
    return config + f'\n[data]\ntrain = "{prompts.as_posix()}"\n'


def run_cli(
    args: Sequence[str],
    *,
    pythonpath: Sequence[Path] = (),
    load: str | None = None,
    disable: str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m omni_rl.cli`` like the console script, with fake distributions on PYTHONPATH."""
    environment = {k: v for k, v in os.environ.items() if k not in (LOAD_ENV, DISABLE_ENV, "PYTHONPATH")}
    environment |= {"NO_COLOR": "1", "COLUMNS": "250", "PYTHONPATH": os.pathsep.join(map(str, pythonpath))}
    if load is not None:
        environment[LOAD_ENV] = load
    if disable is not None:
        environment[DISABLE_ENV] = disable
    environment |= dict(env or {})
    return subprocess.run(
        [sys.executable, "-m", "omni_rl.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        timeout=120,
    )
