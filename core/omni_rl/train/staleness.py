"""Checks and metrics of disaggregated / one-step-off rollout and rollout correction (docs/distributed.md).

The checks need the built loss (its requirements), so they run when the trainer starts, before Ray does; each
problem names its option's ``$.path`` so a config that cannot work is refused rather than silently ignored.
"""

from __future__ import annotations

from typing import Any

from omni_rl.config.schema import ResolvedConfig
from omni_rl.errors import ConfigError, RuntimeFailure


def asynchrony_problems(config: ResolvedConfig, loss: Any) -> list[str]:
    """Every problem of the combination, as ``message @ $.path`` lines (empty: fine)."""
    problems: list[str] = []
    run, cluster, rc = config.run, config.cluster, config.rollout_correction
    requirements = loss.requirements
    if run.max_staleness and not cluster.rollout_workers:
        problems.append(
            f"max_staleness = {run.max_staleness} samples the next batch while the policy workers train, which "
            "needs rollout workers apart from them: set [cluster] rollout_workers >= 1, or max_staleness = 0 "
            "@ $.run.max_staleness"
        )
    if cluster.rollout_workers and cluster.strategy == "fsdp2":
        problems.append(
            'rollout workers are not supported with strategy = "fsdp2" yet (the weights would have to be gathered '
            'from the shards for every sync); use strategy = "ddp" or rollout_workers = 0 @ $.cluster.rollout_workers'
        )
    corrects = rc.mode != "off" or rc.rejection != "off"
    if corrects and requirements.inputs != "trajectory":
        problems.append(
            f"rollout correction needs per-step log-probs, but loss {config.components['loss'].name!r} trains on "
            'the forward process (no rollout log-probs); set mode = "off" and rejection = "off" '
            "@ $.rollout_correction.mode"
        )
    elif (rc.mode == "decoupled" or rc.rejection != "off") and not requirements.sample_weights:
        problems.append(
            f"loss {config.components['loss'].name!r} does not apply per-sample weights "
            '(LossRequirements.sample_weights), which decoupled IS and rejection need; use mode = "bypass" '
            "without rejection, or a loss that does (flow_grpo, grpo_guard, flow_dppo) @ $.rollout_correction.mode"
        )
    if rc.mode == "decoupled" and not config.optim.recompute_old_log_probs:
        problems.append(
            'mode = "decoupled" recomputes the old log-probs, but [optim] recompute_old_log_probs = false asks '
            'not to; set it to true, or use mode = "bypass" @ $.optim.recompute_old_log_probs'
        )
    return problems


def check_asynchrony(config: ResolvedConfig, loss: Any) -> None:
    """Raise one ConfigError listing every problem of :func:`asynchrony_problems`."""
    problems = asynchrony_problems(config, loss)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(
            f"invalid rollout configuration ({len(problems)} problem(s)):\n{lines}",
            hint="docs/distributed.md explains rollout workers, max_staleness and rollout correction",
        )


def staleness_metrics(step: int, version: int, max_staleness: int) -> dict[str, float]:
    """``rollout/version`` and ``rollout/staleness`` (updates between the sampling weights and the trained ones)
    of step ``step``'s batch; a batch sampled by a newer version than the policy's, or older than allowed, is a
    bug and stops the run."""
    current = step - 1  # the policy's version when step ``step`` trains: the update of step - 1
    staleness = current - version
    if not 0 <= staleness <= max_staleness:
        raise RuntimeFailure(
            f"step {step}'s batch was sampled with weights version {version}, but the policy is at version "
            f"{current} and [run] max_staleness = {max_staleness}",
            hint="this is a bug in omni-rl's rollout pipeline; please report it with the run's config",
        )
    return {"rollout/version": float(version), "rollout/staleness": float(staleness)}
