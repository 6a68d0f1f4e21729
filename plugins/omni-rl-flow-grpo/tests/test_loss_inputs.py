"""The guards and the KL tail the Flow-GRPO family's losses share (flow_grpo, grpo_guard, flow_dppo): what each
returns, and the one line each refusal reads."""

from __future__ import annotations

import pytest
import torch
from omni_rl_flow_grpo.kl import reference_kl, with_reference_kl
from omni_rl_flow_grpo.loss_inputs import require_old, require_scale

from omni_rl.batch import SamplerStep

B = 3


def _step(shift: float = 0.0, scale: torch.Tensor | None = None) -> SamplerStep:
    mean = torch.arange(B * 4, dtype=torch.float32).reshape(B, 4) / 10 + shift
    return SamplerStep(sample=mean, mean=mean, std_dev_t=torch.full((B,), 0.5), log_prob=None, scale=scale)


def test_require_old_returns_the_step_or_names_what_needs_it() -> None:
    old = _step()
    assert require_old(old, "flow_dppo", needed_for="the trust region needs μ_old") is old
    with pytest.raises(ValueError) as info:
        require_old(None, "flow_dppo", needed_for="the trust region needs μ_old")
    assert str(info.value) == (
        "flow_dppo: no old view was given (the trust region needs μ_old); the update must evaluate the views in "
        "loss.requirements.views"
    )


def test_require_scale_is_float32_per_sample_or_names_the_fix() -> None:
    scale = require_scale(
        _step(scale=torch.tensor([[0.1], [0.2], [0.3]], dtype=torch.float64)), B, "x", needed_for="", fix=""
    )
    assert scale.dtype == torch.float32 and scale.shape == (B,)
    torch.testing.assert_close(scale, torch.tensor([0.1, 0.2, 0.3]))
    with pytest.raises(ValueError) as info:
        require_scale(_step(), B, "grpo_guard", needed_for="RatioNorm's c and b need", fix="use flow_sde")
    assert str(info.value) == (
        "grpo_guard: the sampler does not report the std of x' (SamplerStep.scale), which RatioNorm's c and b need; "
        "use flow_sde"
    )


def test_with_reference_kl_adds_the_weighted_term_only_when_it_is_on() -> None:
    policy_loss = torch.tensor(0.25)
    current, reference = _step(), _step(shift=0.1)
    loss, kl = with_reference_kl(policy_loss, current, None, 0.0, B, "flow_grpo")  # off: no reference needed
    assert loss is policy_loss and kl is None
    loss, kl = with_reference_kl(policy_loss, current, reference, 0.04, B, "flow_grpo")
    expected = reference_kl(current, reference, B, "flow_grpo")
    assert kl is not None and float(kl) == pytest.approx(float(expected)) and float(kl) > 0
    assert float(loss) == pytest.approx(0.25 + 0.04 * float(expected))
    with pytest.raises(ValueError, match="flow_grpo: kl_coef > 0 but no reference view was given"):
        with_reference_kl(policy_loss, current, None, 0.04, B, "flow_grpo")
