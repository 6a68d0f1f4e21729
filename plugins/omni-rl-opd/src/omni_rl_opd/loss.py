"""``opd``: on-policy distillation (DiffusionOPD, arXiv 2605.15055; docs/math.md#opd-loss).

The student is the trained policy; the teacher is frozen (the base model with the LoRA off, or a LoRA loaded into
a second adapter). On the *student's own* states (its rollout, drawn afresh by the loss from each sample's
generator so that the states come from the current weights, not from the rollout's older ones), the teacher says
where each transition should go, and the student's transition mean is pulled onto the teacher's:

- x_0 ~ N(0, I); for j = 0 … S-1 on the model's S-step schedule σ_0 = 1 > … > σ_S = 0:
  v_θ = v_θ(x_j, σ_j) (with gradients), v_T = (y_k - x_j) / (σ_{j+1} - σ_j) where y is the teacher's Euler ODE from
  y_0 = x_j over k equal substeps of [σ_j, σ_{j+1}] (k = 1: v_T = v_T(x_j, σ_j));
  μ_θ, μ_T = the flow-SDE transition means of v_θ and v_T (the flow_grpo sampler's); x_{j+1} = μ_θ + s·sqrt(-dt)·ε
  (detached, the student's own sample).
- ``kl``: L = mean_j kl_j with kl_j = mean_dims (μ_θ - μ_T)² / (2 s_j²), the flow_grpo plugin's KL-to-reference
  term (its reference is the teacher here); ``velocity_mse``: L = mean_j mean_dims (v_θ - v_T)².

Because the means are linear in v, kl_j = c_j²·mean (v_θ - v_T)² / (2 s_j²) with c_j = (1 + s_j²(1 - σ_j)/(2σ_j))·dt:
both objectives match velocities, weighted differently per step. With k = 1 and a student equal to the teacher
the loss is exactly 0 (the on-policy self-check); a few-step student of a many-step teacher needs k > 1.
"""

from __future__ import annotations

from typing import Any

import torch
from omni_rl_flow_grpo.config import FlowSDEConfig
from omni_rl_flow_grpo.kl import reference_kl
from omni_rl_flow_grpo.samplers.flow_sde import FlowSDESampler
from torch import Tensor

from omni_rl.batch import ForwardLossInputs, LossOutput
from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import LossRequirements
from omni_rl_opd.config import OPDLossConfig

TRAINED_ADAPTER = "default"
#: the teacher LoRA's adapter: the core's views are current / old / reference / ema, and "old" is free here
TEACHER_ADAPTER = "old"
#: a frozen copy of the trained adapter's initial weights while the teacher LoRA passes through it
_STUDENT_INIT = "opd_student_init"


class OPDLoss:
    """On-policy distillation: the current view with gradients, the teacher view without."""

    def __init__(self, config: OPDLossConfig) -> None:
        self.config = config
        self.teacher_view = TEACHER_ADAPTER if config.teacher_lora else "reference"
        self.requirements = LossRequirements(inputs="forward", views=frozenset({"current", self.teacher_view}))
        self.sampler = FlowSDESampler(FlowSDEConfig(noise_level=config.noise_level))

    def setup(self, model: Any) -> None:
        """Load a teacher LoRA into its frozen adapter (through the trained one, which is then restored)."""
        if not self.config.teacher_lora:
            keep = getattr(model, "keep_reference_copy", None)
            if keep is not None:
                keep()
            return
        missing = [n for n in ("add_adapter", "use_adapter", "blend_adapter", "load_lora") if not hasattr(model, n)]
        if missing:
            raise RuntimeFailure(
                f"opd: teacher_lora keeps the teacher as a second LoRA adapter, but the model {type(model).__name__} "
                f"has no {', '.join(missing)} @ $.loss.options.teacher_lora",
                hint='use a model plugin with named LoRA adapters (lora_rank > 0), or teacher_lora = "" (the base)',
            )
        model.add_adapter(_STUDENT_INIT, copy_from=TRAINED_ADAPTER)
        model.load_lora(self.config.teacher_lora)
        model.add_adapter(TEACHER_ADAPTER, copy_from=TRAINED_ADAPTER)
        model.blend_adapter(TRAINED_ADAPTER, _STUDENT_INIT, decay=0.0)

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        return {}

    def _teacher_velocity(self, inputs: ForwardLossInputs, x: Tensor, sig: Tensor, nxt: Tensor, rows: Tensor) -> Tensor:
        k = self.config.teacher_substeps
        with torch.no_grad():
            if k == 1:
                return inputs.velocity(self.teacher_view, x, sig, rows).float()
            y = x
            for i in range(k):
                a = sig + (nxt - sig) * (i / k)
                b = sig + (nxt - sig) * ((i + 1) / k)
                v = inputs.velocity(self.teacher_view, y, a, rows).float()
                y = y + v * (b - a).view(-1, *([1] * (x.ndim - 1)))
            return (y - x) / (nxt - sig).view(-1, *([1] * (x.ndim - 1)))

    def __call__(self, inputs: ForwardLossInputs) -> LossOutput:
        cfg = self.config
        if inputs.sigma_schedule is None:
            raise RuntimeFailure(
                "opd: the inputs carry no sigma_schedule, so the student's schedule is unknown",
                hint="the update engine passes it; when calling the loss directly, pass sigma_schedule=...",
            )
        x0 = inputs.x0.float()
        device, batch, shape = x0.device, x0.shape[0], tuple(x0.shape[1:])
        schedule = inputs.sigma_schedule(cfg.steps).to(device).float()
        sigma_max = schedule[1].expand(batch) if cfg.steps > 1 else None
        x = torch.stack([torch.randn(shape, generator=g, dtype=torch.float32) for g in inputs.generators]).to(device)
        rows = torch.arange(batch, device=device)
        total = torch.zeros((), device=device)
        metrics: dict[str, Any] = {}
        mse_sum = kl_sum = 0.0
        for j in range(cfg.steps):
            sig, nxt = schedule[j].expand(batch), schedule[j + 1].expand(batch)
            v_theta = inputs.velocity("current", x, sig, rows).float()
            v_teacher = self._teacher_velocity(inputs, x, sig, nxt, rows)
            noise = torch.stack([torch.randn(shape, generator=g, dtype=torch.float32) for g in inputs.generators])
            student = self.sampler.step(x, v_theta, sig, nxt, sigma_max=sigma_max, noise=noise.to(device))
            mse = (v_theta - v_teacher).pow(2).flatten(1).mean(dim=1).mean()
            if cfg.objective == "kl":
                teacher = self.sampler.step(x, v_teacher, sig, nxt, sigma_max=sigma_max, noise=noise.to(device))
                kl = reference_kl(student, teacher, batch, "opd")
                total = total + kl
                kl_sum += float(kl.detach())
                metrics[f"kl/step_{j}"] = float(kl.detach())
            else:
                total = total + mse
            mse_sum += float(mse.detach())
            x = student.sample.detach()
        metrics["velocity_mse"] = mse_sum / cfg.steps
        if cfg.objective == "kl":
            metrics["kl"] = kl_sum / cfg.steps
        return LossOutput(loss=total / cfg.steps, metrics=metrics)
