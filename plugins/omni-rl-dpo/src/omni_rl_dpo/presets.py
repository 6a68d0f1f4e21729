"""The ``dpo`` (online), ``dpo_offline`` and ``dgpo`` algorithm presets.

Sources and choices:

- β = 5000: the Diffusion-DPO reference's value (``--beta_dpo 5000`` in its SD1.5 launcher). Its loss is a mean
  over latent elements, as ours is, so the scale carries over; lower β lets the policy move further from the
  reference before the sigmoid saturates.
- t ~ logit-normal(0, 1) (SD3's training density), one (t, ε) draw per pair and update, as the reference.
- Online (``dpo``): the ``diffusers`` backend samples groups of 8 with the deterministic ``ode`` sampler (a
  forward-process loss needs only clean x₀, so no SDE and no log-probs), 10 steps at CFG 4.5 as the
  ``flow_grpo`` preset does for SD3.5-Medium; each group gives one pair, its best and its worst reward.
- Offline (``dpo_offline``): the ``preference_pairs`` backend replays ``[data] train`` (a preference ``.jsonl``)
  as groups of (chosen, rejected); validation samples with 20 ODE steps at CFG 4.5.
- ``grpo`` advantages: the loss does not use them (pairs come from rewards or the file), but the trainer computes
  and logs one, and it must be some estimator.
"""

from __future__ import annotations

from typing import Any

BETA = 5000.0


def dpo_defaults() -> dict[str, dict[str, Any]]:
    """A fresh copy of the online preset's sections (TOML-shaped)."""
    return {
        "sampler": {"name": "ode"},
        "rollout": {"name": "diffusers", "options": {"group_size": 8, "steps": 10, "cfg": 4.5}},
        "advantage": {"name": "grpo"},
        "loss": {
            "name": "dpo",
            "options": {"beta": BETA, "pairing": "reward", "logit_mean": 0.0, "logit_std": 1.0},
        },
    }


def dpo_offline_defaults() -> dict[str, dict[str, Any]]:
    """A fresh copy of the offline preset's sections (TOML-shaped)."""
    return {
        "sampler": {"name": "ode"},
        "rollout": {"name": "preference_pairs", "options": {"eval_steps": 20, "eval_cfg": 4.5}},
        "advantage": {"name": "grpo"},
        "loss": {
            "name": "dpo",
            "options": {"beta": BETA, "pairing": "offline", "logit_mean": 0.0, "logit_std": 1.0},
        },
    }


def dgpo_defaults() -> dict[str, dict[str, Any]]:
    """A fresh copy of the ``dgpo`` preset's sections: ODE rollouts in groups of 8 (DGPO trains on ODE samples),
    ``grpo`` advantages (the loss's weights), β 100 with the frozen reference (the authors' frozen mode)."""
    return {
        "sampler": {"name": "ode"},
        "rollout": {"name": "diffusers", "options": {"group_size": 8, "steps": 10, "cfg": 4.5}},
        "advantage": {"name": "grpo"},
        "loss": {"name": "dgpo", "options": {"beta": 100.0, "reference": "frozen"}},
    }
