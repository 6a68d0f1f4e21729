"""The ``grpo_guard`` algorithm preset: Flow-GRPO-Fast's setup with the loss switched to GRPO-Guard.

Sources: GRPO-Guard (arXiv 2510.22319) is a change to Flow-GRPO's loss only, and its VeRL-Omni recipe reuses the
Flow-GRPO SD3.5/Qwen-Image setup, changing the loss mode and ε alone. So everything but the loss is the
``flow_grpo`` preset's (``omni_rl_flow_grpo.presets``):

- ``flow_sde`` with a = 0.7 in a 2-step window drawn in [0, 5) (Flow-GRPO-Fast); 10 steps, CFG 4.5, group 8.
  GRPO-Guard's reference implementations require Flow-GRPO's SDE (its RatioNorm is derived for that Gaussian).
- ``grpo`` advantages with the global std.
- ``grpo_guard`` loss: ε = 2e-6 on the normalised ratio (VeRL-Omni's GRPO-Guard recipe,
  docs/math.md#grpo-guard-loss), advantage clip 5 (flow_grpo's), the per-step reweighting on, no KL (the paper's
  point is to regulate the clip without heavy KL regularisation; ``kl_coef`` adds flow_grpo's KL term).
"""

from __future__ import annotations

from typing import Any

from omni_rl_flow_grpo.presets import flow_grpo_defaults


def grpo_guard_defaults() -> dict[str, dict[str, Any]]:
    """A fresh copy of the preset's sections (TOML-shaped), so no caller can alter another's defaults."""
    defaults = flow_grpo_defaults()
    defaults["loss"] = {
        "name": "grpo_guard",
        "options": {"clip_ratio": 2e-6, "adv_clip_max": 5.0, "kl_coef": 0.0, "step_reweight": True},
    }
    return defaults
