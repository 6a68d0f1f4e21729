"""Options of the ``opd`` loss (kept apart so ``hooks.py`` registers them without importing torch)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from omni_rl.validators import int_between, non_negative_finite

OBJECTIVES: tuple[str, ...] = ("kl", "velocity_mse")


def _kl_needs_noise(instance: Any, attribute: attrs.Attribute, value: float) -> None:
    non_negative_finite(instance, attribute, value)
    if instance.objective == "kl" and value <= 0:
        raise ValueError(
            "noise_level must be > 0 with objective = 'kl': the per-step Gaussian KL divides by the transition's "
            "noise scale; use objective = 'velocity_mse' for ODE (noise_level = 0) student rollouts"
        )


@attrs.frozen(kw_only=True)
class OPDLossConfig:
    """``[loss] name = "opd"``: on-policy distillation (docs/math.md#opd-loss).

    Each update call rolls the student (the trained policy, no gradient) out for ``steps`` steps of the model's
    schedule from fresh noise, with the flow-SDE at ``noise_level`` (0: the ODE); at every state x_j the frozen
    teacher integrates its own ODE over [σ_j, σ_{j+1}] in ``teacher_substeps`` Euler steps, giving its effective
    velocity v_T. The loss is the mean over steps of the per-step Gaussian KL between the student's and the
    teacher's transition means (``"kl"``, through the flow_grpo plugin's KL-to-reference term), or of
    mean (v_θ - v_T)² (``"velocity_mse"``).
    """

    #: the student's sampling steps (the few-step schedule it is distilled for)
    steps: int = attrs.field(default=4, validator=int_between(1, 1000))
    #: teacher Euler substeps per student step: 1 = the teacher replays the student's own steps (DiffusionOPD's
    #: per-step matching); k > 1 = a k-times finer teacher integration (few-step distillation of a many-step model)
    teacher_substeps: int = attrs.field(default=1, validator=int_between(1, 1000))
    objective: Literal["kl", "velocity_mse"] = attrs.field(default="kl", validator=attrs.validators.in_(OBJECTIVES))
    #: a of the student rollout's flow-SDE noise s = a·sqrt(σ / (1 - σ)); 0 = ODE (only with velocity_mse)
    noise_level: float = attrs.field(default=0.7, converter=float, validator=_kl_needs_noise)
    #: "" = the base model with its LoRA off is the teacher; else a directory with a LoRA written by save_lora
    #: (a run's checkpoint), loaded into a frozen adapter
    teacher_lora: str = ""
