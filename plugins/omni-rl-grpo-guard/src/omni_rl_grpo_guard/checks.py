"""Config checks across sections (``LossSpec.check``) for ``grpo_guard``: what its options alone cannot validate.

Stdlib-only, like ``config.py``: ``hooks.py`` hands it to the registry, and ``omni-rl check`` / ``run`` run it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omni_rl_flow_grpo.config import CPSConfig

from omni_rl_grpo_guard.config import GRPOGuardLossConfig


def grpo_guard_loss_check(components: Mapping[str, Any]) -> list[str]:
    """``grpo_guard`` needs a sampler whose log-prob is a normalised Gaussian density: refuse a stochastic ``cps``.

    RatioNorm's bias b = mean(Δ²)/(2c²) and scale c = σ_t are derived for log p = mean[−(x' − μ)²/(2σ_t²) − …]
    (:mod:`omni_rl_grpo_guard.ratio_norm`); cps's reference log-prob −mean(x' − μ)² drops the 1/(2s²), so the
    formulas would neither remove its bias nor put its steps on one scale. Flow-GRPO's reference GRPO-Guard recipes
    (VeRL-Omni, Flow-Factory) require its SDE as well. A cps with η = 0 trains nothing and is left alone.
    """
    loss, sampler = components.get("loss"), components.get("sampler")
    if loss is None or sampler is None or not isinstance(loss.options, GRPOGuardLossConfig):
        return []
    if not isinstance(sampler.options, CPSConfig) or sampler.options.noise_level == 0:
        return []
    return [
        f"invalid value: sampler {sampler.name!r} with loss 'grpo_guard': RatioNorm's bias and scale are derived "
        "for a normalised Gaussian log-prob, and cps scores a step by -mean (x' - mu)^2 without the 1/(2 s^2); "
        'set [sampler] name = "flow_sde", or use loss "flow_grpo" or "flow_dppo" with cps @ $.sampler.name'
    ]
