"""Hook implementation: the ``mix_grpo`` algorithm preset.

MixGRPO adds no component of its own: its sliding SDE window (``window_mode = "progressive"``) and its Flash
solver (``ode_solver = "dpm_solver_2m"``) are options of omni-rl-flow-grpo's windowed samplers, run by the
diffusers backend. This module yields only the preset table, so it imports nothing heavy (no torch).
"""

from __future__ import annotations

from omni_rl import AlgorithmSpec, hookimpl
from omni_rl_mix_grpo.presets import mix_grpo_defaults


@hookimpl
def omni_rl_algorithms() -> list[AlgorithmSpec]:
    return [
        AlgorithmSpec(
            name="mix_grpo",
            summary="MixGRPO-Flash: flow_sde in a 4-step window sliding 1 step every 25 training steps, "
            "DPM-Solver++(2M) outside it (8 steps), grpo advantages within each group, clipped PPO loss",
            defaults=mix_grpo_defaults(),
        )
    ]
