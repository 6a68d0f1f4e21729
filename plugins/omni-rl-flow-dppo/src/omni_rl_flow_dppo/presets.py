"""The ``flow_dppo`` algorithm preset: Flow-GRPO-Fast's setup with the loss switched to Flow-DPPO.

Sources: Flow-DPPO keeps Flow-GRPO's SDE rollout, group advantages and per-step ratio and replaces only the ratio
clip (its UniRL reference and VeRL-Omni's recipe run on the Flow-GRPO Qwen-Image/SD3.5 setups with the ``sde``
sampler). So everything but the loss is the ``flow_grpo`` preset's (``omni_rl_flow_grpo.presets``):

- ``flow_sde`` with a = 0.7 in a 2-step window drawn in [0, 5) (Flow-GRPO-Fast); 10 steps, CFG 4.5, group 8.
- ``grpo`` advantages with the global std.
- ``flow_dppo`` loss: ``kl_mask_threshold`` = 1e-5 (docs/math.md#flow-dppo-loss; UniRL's and VeRL-Omni's default), no
  KL to the reference (UniRL's ``beta`` defaults to 0).
"""

from __future__ import annotations

from typing import Any

from omni_rl_flow_grpo.presets import flow_grpo_defaults


def flow_dppo_defaults() -> dict[str, dict[str, Any]]:
    """A fresh copy of the preset's sections (TOML-shaped), so no caller can alter another's defaults."""
    defaults = flow_grpo_defaults()
    defaults["loss"] = {"name": "flow_dppo", "options": {"kl_mask_threshold": 1e-5, "kl_coef": 0.0}}
    return defaults
