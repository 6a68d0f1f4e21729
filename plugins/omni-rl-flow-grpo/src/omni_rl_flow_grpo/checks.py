"""Config checks across sections (``LossSpec.check``): what ``flow_grpo``'s options alone cannot validate, and
the window helpers the other policy-gradient losses' checks (``grpo_guard``, ``flow_dppo``) build on.

Stdlib-only, like ``config.py``: ``hooks.py`` hands these to the registry, and ``omni-rl check`` runs them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from omni_rl_flow_grpo.config import CPSConfig, FlowGRPOLossConfig
from omni_rl_flow_grpo.samplers.window import window_can_reach_last_step


def cps_window_on_last_step(components: Mapping[str, Any]) -> tuple[CPSConfig, int] | None:
    """(cps options, rollout steps) when the sampler is a stochastic ``cps`` whose SDE window can include the
    schedule's last step, where s = σ'·sin(ηπ/2) = 0; None otherwise (or when the rollout backend has no
    ``steps`` option, in which case the worker's loss reports the NaN as usual).

    Shared by every loss that divides by cps's std at a trained step: ``flow_grpo``'s KL (1/(2s²)) and
    ``flow_dppo``'s trust-region KL (1/(2·scale²)).
    """
    sampler, rollout = components.get("sampler"), components.get("rollout")
    if sampler is None or not isinstance(sampler.options, CPSConfig) or sampler.options.noise_level == 0:
        return None
    steps = getattr(rollout.options, "steps", None) if rollout is not None else None
    if not isinstance(steps, int) or isinstance(steps, bool) or not window_can_reach_last_step(sampler.options, steps):
        return None
    return sampler.options, steps


def keep_window_off_last_step(window: CPSConfig, steps: int) -> str:
    """How to keep the window of a ``steps``-step schedule off its last step: the options to set, by path."""
    lo, _ = window.window_range
    size = window.window_size
    if size >= steps:
        return (
            f"$.sampler.options.window_size below {steps} (the rollout's steps) and $.sampler.options.window_range "
            f"to end at {steps - 1}"
        )
    return f"$.sampler.options.window_range = [{min(lo, steps - 1 - size)}, {steps - 1}] (hi <= {steps - 1})"


def describe_window(window: CPSConfig) -> str:
    """``window_size = W, window_range = [lo, hi], mode``, as the problems quote it."""
    lo, hi = window.window_range
    return f"window_size = {window.window_size}, window_range = [{lo}, {hi}], {window.window_mode}"


def flow_grpo_loss_check(components: Mapping[str, Any]) -> list[str]:
    """``cps`` with a KL term must keep its SDE window off the last step.

    At the last step σ' = 0, so cps's s = σ'·sin(ηπ/2) = 0 and the KL's 1/(2s²) makes the loss NaN (the
    policy term is fine there: cps's log p ≡ 0). ``flow_sde`` has s > 0 at every step and is not affected.
    """
    loss, sampler = components.get("loss"), components.get("sampler")
    if loss is None or sampler is None or not isinstance(loss.options, FlowGRPOLossConfig):
        return []
    tree = tree_problems(components)
    reach = cps_window_on_last_step(components)
    if loss.options.kl_coef <= 0 or reach is None:
        return tree
    window, steps = reach
    return [
        *tree,
        f"invalid value: kl_coef = {loss.options.kl_coef:g} with sampler {sampler.name!r}: its SDE window "
        f"({describe_window(window)}) can include the last of the "
        f"{steps} rollout steps, where cps has s = sigma' * sin(eta * pi / 2) = 0 and the KL divides by 2 s^2 "
        f"(a NaN loss); set {keep_window_off_last_step(window, steps)}, or kl_coef = 0, or the flow_sde sampler "
        "@ $.loss.options.kl_coef",
    ]


def grpo_advantage_check(components: Mapping[str, Any]) -> list[str]:
    """``grpo`` compares each sample with its group's mean, so a group of one sample (``[rollout] options.group_size
    = 1``) is its own mean: every advantage is 0, no optimizer step is ever taken, and the run idles to its end with
    exit 0. A rollout backend without a ``group_size`` option is not checked."""
    advantage, rollout = components.get("advantage"), components.get("rollout")
    group_size = getattr(rollout.options, "group_size", None) if rollout is not None else None
    if advantage is None or not isinstance(group_size, int) or isinstance(group_size, bool) or group_size >= 2:
        return []
    return [
        f"invalid value: group_size = {group_size} with the {advantage.name!r} advantage, which compares each "
        "image with the other images of its prompt: a group of one is its own mean, so every advantage is 0 and "
        "nothing is trained; set group_size to 2 or more (Flow-GRPO uses 16, a small test 4) "
        "@ $.rollout.options.group_size"
    ]


def tree_problems(components: Mapping[str, Any]) -> list[str]:
    """Tree rollouts (docs/math.md#tree-rollouts): the loss's ``tree_branching`` is the sampler's (the rollout
    branches, the loss credits each level), and a group holds exactly the tree's leaves."""
    loss, sampler, rollout = components.get("loss"), components.get("sampler"), components.get("rollout")
    loss_tree = tuple(getattr(loss.options, "tree_branching", ()) or ())
    sampler_tree = tuple(getattr(sampler.options, "tree_branching", ()) or ()) if sampler is not None else ()
    problems = []
    if loss_tree != sampler_tree:
        problems.append(
            f"invalid value: the loss's tree_branching {list(loss_tree)} differs from the sampler's "
            f"{list(sampler_tree)}: the rollout branches by the sampler's and the loss credits the levels by its own; "
            "set both to the same list @ $.loss.options.tree_branching"
        )
    group_size = getattr(rollout.options, "group_size", None) if rollout is not None else None
    if sampler_tree and isinstance(group_size, int) and group_size != math.prod(sampler_tree):
        problems.append(
            f"invalid value: group_size = {group_size} but tree_branching {list(sampler_tree)} has "
            f"{math.prod(sampler_tree)} leaves; set group_size = {math.prod(sampler_tree)} "
            "@ $.rollout.options.group_size"
        )
    return problems
