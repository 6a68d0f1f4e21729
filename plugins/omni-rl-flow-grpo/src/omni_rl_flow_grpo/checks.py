"""Config checks across sections (``LossSpec.check``): what ``flow_grpo``'s options alone cannot validate.

Stdlib-only, like ``config.py``: ``hooks.py`` hands these to the registry, and ``omni-rl check`` runs them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omni_rl_flow_grpo.config import CPSConfig, FlowGRPOLossConfig
from omni_rl_flow_grpo.samplers.window import window_can_reach_last_step


def flow_grpo_loss_check(components: Mapping[str, Any]) -> list[str]:
    """``cps`` with a KL term must keep its SDE window off the last step.

    At the last step σ' = 0, so cps's s = σ'·sin(ηπ/2) = 0 and the KL's 1/(2s²) makes the loss NaN (the
    policy term is fine there: cps's log p ≡ 0). ``flow_sde`` has s > 0 at every step and is not affected.
    """
    loss, sampler, rollout = (components.get(key) for key in ("loss", "sampler", "rollout"))
    if loss is None or sampler is None or not isinstance(loss.options, FlowGRPOLossConfig):
        return []
    window = sampler.options
    if loss.options.kl_coef <= 0 or not isinstance(window, CPSConfig) or window.noise_level == 0:
        return []
    steps = getattr(rollout.options, "steps", None) if rollout is not None else None
    if not isinstance(steps, int) or isinstance(steps, bool) or not window_can_reach_last_step(window, steps):
        return []  # a backend without a `steps` option: the worker's loss reports a NaN as usual
    lo, hi = window.window_range
    size = window.window_size
    if size >= steps:
        fix = (
            f"$.sampler.options.window_size below {steps} (the rollout's steps) and $.sampler.options.window_range "
            f"to end at {steps - 1}"
        )
    else:
        fix = f"$.sampler.options.window_range = [{min(lo, steps - 1 - size)}, {steps - 1}] (hi <= {steps - 1})"
    return [
        f"invalid value: kl_coef = {loss.options.kl_coef:g} with sampler {sampler.name!r}: its SDE window "
        f"(window_size = {size}, window_range = [{lo}, {hi}], {window.window_mode}) can include the last of the "
        f"{steps} rollout steps, where cps has s = sigma' * sin(eta * pi / 2) = 0 and the KL divides by 2 s^2 "
        f"(a NaN loss); set {fix}, or kl_coef = 0, or the flow_sde sampler @ $.loss.options.kl_coef"
    ]
