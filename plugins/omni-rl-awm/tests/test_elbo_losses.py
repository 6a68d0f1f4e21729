"""``elbo_pg`` and ``v_grpo`` against hand computation on the linear toy v = θ·x_t, the on-policy self-check (the
first ratio is exactly 1, so PEPG and V-GRPO start as EPG does), and the conformance suites."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch
from awm_toys import LinearViews, forward_inputs
from omni_rl_awm import hooks
from omni_rl_awm.elbo_config import ELBOPGLossConfig, VGRPOLossConfig
from omni_rl_awm.elbo_loss import ELBOPolicyLoss

from omni_rl.registry import Registry
from omni_rl.specs import AlgorithmSpec, LossSpec
from omni_rl.testing import AlgorithmConformance, LossConformance

X0 = torch.tensor([[1.0, 2.0], [-1.0, 0.5]])
T = torch.tensor([[0.5, 0.25], [0.75, 0.5]])
EPS = torch.tensor([[[0.5, -1.0], [2.0, 1.0]], [[1.0, 0.0], [-0.5, 0.5]]])


def _ell(theta: float, b: int, k: int) -> float:
    t = float(T[b, k])
    x_t = (1 - t) * X0[b] + t * EPS[b, k]
    return float(((theta * x_t - (EPS[b, k] - X0[b])) ** 2).mean())


def _fixed(loss: ELBOPolicyLoss) -> ELBOPolicyLoss:
    loss.draw = lambda inputs: (T.clone(), EPS.clone())  # type: ignore[method-assign]
    return loss


def test_epg_is_minus_the_advantage_weighted_elbo_and_its_gradient() -> None:
    loss = _fixed(ELBOPolicyLoss(ELBOPGLossConfig(draws=2)))
    assert loss.requirements.views == {"current"} and loss.requirements.timesteps == 1
    model = LinearViews(0.8)
    out = loss(forward_inputs(model, X0, torch.tensor([1.5, -0.5])))
    elbo = [-(_ell(0.8, b, 0) + _ell(0.8, b, 1)) / 2 for b in range(2)]
    assert float(out.loss) == pytest.approx(-(1.5 * elbo[0] - 0.5 * elbo[1]) / 2, rel=1e-5)
    (grad,) = torch.autograd.grad(out.loss, model.theta)
    h = 1e-3
    numeric = []
    for theta in (0.8 + h, 0.8 - h):
        e = [-(_ell(theta, b, 0) + _ell(theta, b, 1)) / 2 for b in range(2)]
        numeric.append(-(1.5 * e[0] - 0.5 * e[1]) / 2)
    assert float(grad) == pytest.approx((numeric[0] - numeric[1]) / (2 * h), rel=1e-3)
    assert out.metrics["elbo"] == pytest.approx(sum(elbo) / 2, rel=1e-5)


@pytest.mark.parametrize("config", [ELBOPGLossConfig(draws=2, objective="pepg"), VGRPOLossConfig(draws=2)])
def test_on_policy_the_first_ratio_is_one_and_the_gradient_is_epgs(config: Any) -> None:
    loss = _fixed(ELBOPolicyLoss(config))
    assert "old" in loss.requirements.views
    assert loss.anchors is not None
    loss.anchors.old_is_current = True  # before the update's first optimizer step
    model = LinearViews(0.8, old=123.0)  # the old view must not be evaluated
    inputs = forward_inputs(model, X0, torch.tensor([0.5, -0.5]))
    inputs.group_ids = torch.tensor([0, 0])
    out = loss(inputs)
    assert out.metrics["ratio_mean"] == 1.0 and out.metrics["ratio_std"] == 0.0
    assert "old" not in model.views_called()
    (grad,) = torch.autograd.grad(out.loss, model.theta)
    assert torch.isfinite(grad) and float(grad) != 0.0


def test_v_grpo_off_policy_ratio_soft_clip_and_kl_by_hand() -> None:
    config = VGRPOLossConfig(draws=2, adaptive_weighting=False, kl_coef=0.1, adv_soft_clip=1.0, clip_ratio=10.0)
    loss = _fixed(ELBOPolicyLoss(config))
    loss.anchors.old_is_current = False  # type: ignore[union-attr]
    model = LinearViews(0.8, old=0.7, reference=0.6)
    inputs = forward_inputs(model, X0, torch.tensor([2.0, -1.0]))
    out = loss(inputs)
    elbo = [-(_ell(0.8, b, 0) + _ell(0.8, b, 1)) / 2 for b in range(2)]
    old = [-(_ell(0.7, b, 0) + _ell(0.7, b, 1)) / 2 for b in range(2)]
    adv = [float(torch.tanh(torch.tensor(2.0))), float(torch.tanh(torch.tensor(-1.0)))]
    ratio = [float(torch.exp(torch.tensor(elbo[b] - old[b]))) for b in range(2)]
    policy = -(adv[0] * ratio[0] + adv[1] * ratio[1]) / 2
    kl = 0.0
    for b in range(2):
        for k in range(2):
            t = float(T[b, k])
            x_t = (1 - t) * X0[b] + t * EPS[b, k]
            kl += float(((0.2 * x_t) ** 2).mean()) / 4
    assert out.metrics["policy_loss"] == pytest.approx(policy, rel=1e-5)
    assert out.metrics["kl"] == pytest.approx(kl, rel=1e-5)
    assert float(out.loss) == pytest.approx(policy + 0.1 * kl, rel=1e-5)
    assert out.metrics["ratio_mean"] == pytest.approx(sum(ratio) / 2, rel=1e-5)


def test_v_grpo_keeps_whole_groups_and_elbo_pg_samples_alone() -> None:
    assert ELBOPolicyLoss(VGRPOLossConfig()).requirements.batch_unit == "group"
    alone = VGRPOLossConfig(group_shared_draws=False, adaptive_weighting=False)
    assert ELBOPolicyLoss(alone).requirements.batch_unit == "sample"
    assert ELBOPolicyLoss(ELBOPGLossConfig()).requirements.batch_unit == "sample"


def _spec(name: str) -> LossSpec:
    return next(spec for spec in hooks.omni_rl_losses() if spec.name == name)


class _ELBOConformance(LossConformance):
    loss_name: ClassVar[str] = ""

    @pytest.fixture
    def spec(self) -> LossSpec:
        return _spec(self.loss_name)

    @pytest.fixture
    def loss_inputs(self, component: Any) -> Any:
        generator = torch.Generator().manual_seed(0)
        n = self.batch_size
        x0 = torch.randn((n, *self.latent_shape), generator=generator)
        model = LinearViews(0.3, old=0.3 + 1e-3, reference=0.2)
        return forward_inputs(model, x0, torch.randn(n, generator=generator))

    def gradient_leaves(self, loss_inputs: Any) -> list[Any]:
        return [loss_inputs.velocity.theta]


class TestELBOPGLoss(_ELBOConformance):
    loss_name = "elbo_pg"

    @pytest.fixture(
        params=[{}, {"objective": "pepg", "draws": 2, "time_sampling": "logit_normal"}], ids=["epg", "pepg"]
    )
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param


class TestVGRPOLoss(_ELBOConformance):
    loss_name = "v_grpo"

    @pytest.fixture(
        params=[{}, {"kl_coef": 0.1, "adv_soft_clip": 0.0, "stratified": False, "time_sampling": "discrete"}],
        ids=["defaults", "kl-hard-clip-discrete"],
    )
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param


class _ELBOAlgorithm(AlgorithmConformance):
    preset: ClassVar[str] = ""
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        return next(spec for spec in hooks.omni_rl_algorithms() if spec.name == self.preset)

    def test_the_preset_rolls_out_with_the_ode_and_no_cfg(self, spec: AlgorithmSpec, registry: Registry) -> None:
        resolved = self.resolved_preset(spec, registry).file
        assert resolved.sampler.name == "ode"
        assert resolved.rollout.options["cfg"] == 1.0


class TestELBOPGAlgorithm(_ELBOAlgorithm):
    preset = "elbo_pg"


class TestVGRPOAlgorithm(_ELBOAlgorithm):
    preset = "v_grpo"
