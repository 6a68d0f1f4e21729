"""Config checks across sections (``LossSpec.check``) for ``flow_dppo``: what its options alone cannot validate.

Stdlib-only, like ``config.py``: ``hooks.py`` hands it to the registry, and ``omni-rl check`` / ``run`` run it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omni_rl_flow_grpo.checks import cps_window_on_last_step, describe_window, keep_window_off_last_step

from omni_rl_flow_dppo.config import FlowDPPOLossConfig


def flow_dppo_loss_check(components: Mapping[str, Any]) -> list[str]:
    """``cps`` must keep its SDE window off the last step, KL term or not.

    The trust region's KL_new,old divides by the step's std squared, and at the last step (σ' = 0) cps's std
    s = σ'·sin(ηπ/2) is 0: the KL is 0/0 (NaN, which no threshold compares against) and the step is not a
    density at all. ``flow_sde``'s std is > 0 at every step. (cps is otherwise fine: see
    :mod:`omni_rl_flow_dppo.trust_region`.)
    """
    loss, sampler = components.get("loss"), components.get("sampler")
    if loss is None or sampler is None or not isinstance(loss.options, FlowDPPOLossConfig):
        return []
    reach = cps_window_on_last_step(components)
    if reach is None:
        return []
    window, steps = reach
    return [
        f"invalid value: sampler {sampler.name!r} with loss 'flow_dppo': its SDE window ({describe_window(window)}) "
        f"can include the last of the {steps} rollout steps, where cps has s = sigma' * sin(eta * pi / 2) = 0 and "
        f"the trust region's KL divides by 2 s^2 (0/0); set {keep_window_off_last_step(window, steps)}, or the "
        "flow_sde sampler @ $.sampler.options.window_range"
    ]
