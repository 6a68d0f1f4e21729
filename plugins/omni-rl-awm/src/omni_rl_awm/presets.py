"""The ``awm`` algorithm preset: the reference's SD3.5-Medium recipe, sized for one machine.

Sources (scxue/advantage_weighted_matching, ``config/dgx_awm.py``, its geneval / ocr configs):

- ``ode`` sampling: AWM trains on clean samples re-noised by the forward process, so any sampler works; the
  reference's PickScore config samples deterministically (noise level 0), and its SA-solver is not offered
  here. 14 steps and no CFG (guidance 1.0), as every config it ships.
- ``grpo`` advantages with the global std (``global_std = True``).
- ``awm`` loss: generalized-Huber weighting with p = 0.25; 6 timestep draws per sample, stratified over the
  sampling schedule's steps 1 … 11 of 14 (its ``time_type = "discrete_wo_init"``, ``timestep_fraction = 0.9``);
  ratio clip 1; advantages clipped at 5 and rescaled to ±1; KL 0.003 to the reference; EMA anchor with
  coefficient 1 and decay min(0.3, 0.001·step).
- Learning rate 3e-4 (its AdamW setting for rank-32 LoRA); one optimizer step per training step, the
  default ``mini_batch = 0``, as its gradient accumulation spans the whole epoch.
- Group size 8 rather than its 24, so that a group fits in one machine's rollout.
"""

from __future__ import annotations

from typing import Any


def awm_defaults() -> dict[str, dict[str, Any]]:
    """A fresh copy of the preset's sections (TOML-shaped), so no caller can alter another's defaults."""
    return {
        "sampler": {"name": "ode", "options": {}},
        "rollout": {"name": "diffusers", "options": {"group_size": 8, "steps": 14, "cfg": 1.0}},
        "advantage": {
            "name": "grpo",
            "options": {"global_std": True, "std_normalize": True, "eps": 1e-4},
        },
        "loss": {
            "name": "awm",
            "options": {
                "weighting": "ghuber",
                "ghuber_power": 0.25,
                "timesteps": 6,
                "time_sampling": "discrete",
                "schedule_steps": 14,
                "schedule_skip_first": True,
                "schedule_fraction": 0.9,
                "clip_ratio": 1.0,
                "adv_clip_max": 5.0,
                "advantage_max": 1.0,
                "kl_coef": 0.003,
                "ema_coef": 1.0,
                "ema_decay": 0.3,
                "ema_decay_schedule": "linear",
                "ema_decay_ramp": 0.001,
            },
        },
        "optim": {"lr": 3e-4},
    }


def _elbo_sections(loss: str) -> dict[str, dict[str, Any]]:
    """ODE rollouts without CFG (the ELBO PG paper trains CFG-free), grpo advantages, the named ELBO loss."""
    return {
        "sampler": {"name": "ode", "options": {}},
        "rollout": {"name": "diffusers", "options": {"group_size": 8, "steps": 10, "cfg": 1.0}},
        "advantage": {"name": "grpo", "options": {"global_std": False, "std_normalize": True, "eps": 1e-4}},
        "loss": {"name": loss, "options": {}},
        "optim": {"lr": 3e-4},
    }


def elbo_pg_defaults() -> dict[str, dict[str, Any]]:
    """``elbo_pg`` (arXiv 2602.04663): ODE rollouts, CFG off, per-group advantages, EPG on a 4-draw ELBO."""
    return _elbo_sections("elbo_pg")


def v_grpo_defaults() -> dict[str, dict[str, Any]]:
    """``v_grpo`` (arXiv 2604.23380): as ``elbo_pg``'s rollouts, GRPO on the whole-generation ELBO ratio."""
    return _elbo_sections("v_grpo")
