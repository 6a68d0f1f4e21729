"""The ``opd`` loss (docs/math.md#opd-loss) against a hand computation on linear stand-ins (student v = a·x,
teacher v = b·x) with two-element latents, its on-policy self-check, and the conformance suites."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import pytest
import torch
from omni_rl_opd import hooks
from omni_rl_opd.config import OPDLossConfig
from omni_rl_opd.loss import OPDLoss

from omni_rl.batch import ForwardLossInputs
from omni_rl.protocols import Loss
from omni_rl.specs import AlgorithmSpec, LossSpec
from omni_rl.testing import AlgorithmConformance, LossConformance, PluginConformance

A, B, ETA = 0.5, -0.8, 0.7
SCHEDULE = [1.0, 0.6, 0.0]


class Linear:
    def __init__(self, a: float = A, b: float = B) -> None:
        self.a = torch.tensor(a, requires_grad=True)
        self.b = b
        self.views: list[str] = []

    def __call__(self, view: str, x: torch.Tensor, sigma: torch.Tensor, samples: Any = None) -> torch.Tensor:
        self.views.append(view)
        return self.a * x if view == "current" else self.b * x


def make_inputs(policy: Linear, seeds: list[int]) -> ForwardLossInputs:
    n = len(seeds)
    return ForwardLossInputs(
        x0=torch.zeros(n, 1, 1, 2),
        advantages=torch.zeros(n),
        rewards=torch.zeros(n),
        group_ids=torch.arange(n),
        generators=[torch.Generator().manual_seed(s) for s in seeds],
        velocity=policy,
        sigma_schedule=lambda steps: torch.tensor(SCHEDULE),
    )


def hand(seed: int, *, a: float, b: float, k: int, objective: str) -> tuple[float, float]:
    """(loss, d loss / da) of one sample, in plain floats."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn((1, 1, 2), generator=g).flatten().tolist()
    total = grad = 0.0
    steps = len(SCHEDULE) - 1
    for j in range(steps):
        sig, nxt = SCHEDULE[j], SCHEDULE[j + 1]
        dt = nxt - sig
        sig_tilde = SCHEDULE[1] if sig == 1 else sig
        s = ETA * math.sqrt(sig / (1 - sig_tilde))
        h = dt / k
        factor = ((1 + b * h) ** k - 1) / dt  # the teacher's k Euler substeps of y' = b·y, as a velocity factor
        vt = [factor * xi for xi in x]
        vs = [a * xi for xi in x]
        c = (1 + s**2 * (1 - sig) / (2 * sig)) * dt  # μ is linear in v with this coefficient
        diff = [vs_i - vt_i for vs_i, vt_i in zip(vs, vt, strict=True)]
        if objective == "kl":
            total += sum((c * d) ** 2 for d in diff) / 2 / (2 * s**2)
            grad += sum(2 * c**2 * d * xi for d, xi in zip(diff, x, strict=True)) / 2 / (2 * s**2)
        else:
            total += sum(d**2 for d in diff) / 2
            grad += sum(2 * d * xi for d, xi in zip(diff, x, strict=True)) / 2
        eps = torch.randn((1, 1, 2), generator=g).flatten().tolist()
        mean = [xi * (1 + s**2 / (2 * sig) * dt) + v * c for xi, v in zip(x, vs, strict=True)]
        x = [m + s * math.sqrt(-dt) * e for m, e in zip(mean, eps, strict=True)]
    return total / steps, grad / steps


@pytest.mark.parametrize(("objective", "k"), [("kl", 1), ("kl", 3), ("velocity_mse", 2)])
def test_loss_and_gradient_match_the_hand_computation(objective: str, k: int) -> None:
    loss = OPDLoss(OPDLossConfig(steps=2, teacher_substeps=k, objective=objective, noise_level=ETA))
    policy = Linear()
    out = loss(make_inputs(policy, [3, 4]))
    want = [hand(seed, a=A, b=B, k=k, objective=objective) for seed in (3, 4)]
    assert out.loss.item() == pytest.approx(sum(w[0] for w in want) / 2, rel=1e-4)
    out.loss.backward()
    assert policy.a.grad.item() == pytest.approx(sum(w[1] for w in want) / 2, rel=1e-4)
    assert set(policy.views) == {"current", "reference"}
    assert policy.views.count("reference") == 2 * k


def test_a_student_equal_to_its_teacher_has_zero_loss() -> None:
    """The on-policy self-check: replayed step by step (k = 1), the teacher is the student."""
    loss = OPDLoss(OPDLossConfig(steps=2))
    out = loss(make_inputs(Linear(a=B), [1, 2]))
    assert out.loss.item() == 0.0 and out.metrics["velocity_mse"] == 0.0


def test_kl_needs_a_noisy_student() -> None:
    with pytest.raises(ValueError, match="velocity_mse"):
        OPDLossConfig(objective="kl", noise_level=0.0)
    OPDLossConfig(objective="velocity_mse", noise_level=0.0)


def test_a_teacher_lora_passes_through_the_trained_adapter() -> None:
    log: list[tuple[str, ...]] = []

    class Model:
        def add_adapter(self, name: str, *, copy_from: str = "default") -> None:
            log.append(("add", name, copy_from))

        def use_adapter(self, name: str) -> Any:
            raise AssertionError

        def blend_adapter(self, target: str, source: str = "default", *, decay: float) -> None:
            log.append(("blend", target, source, str(decay)))

        def load_lora(self, directory: str) -> None:
            log.append(("load", directory))

    loss = OPDLoss(OPDLossConfig(teacher_lora="runs/teacher/checkpoints/step_100"))
    assert loss.requirements.views == frozenset({"current", "old"})
    loss.setup(Model())
    assert log == [
        ("add", "opd_student_init", "default"),
        ("load", "runs/teacher/checkpoints/step_100"),
        ("add", "old", "default"),
        ("blend", "default", "opd_student_init", "0.0"),
    ]


class TestOPDPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_opd.hooks"


class TestOPDLoss(LossConformance):
    @pytest.fixture
    def spec(self) -> LossSpec:
        return hooks.omni_rl_losses()[0]

    @pytest.fixture(params=[{"steps": 2}, {"steps": 2, "objective": "velocity_mse", "teacher_substeps": 2}])
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param

    @pytest.fixture
    def loss_inputs(self, component: Loss) -> ForwardLossInputs:
        n = self.batch_size
        return ForwardLossInputs(
            x0=torch.zeros((n, *self.latent_shape)),
            advantages=torch.zeros(n),
            rewards=torch.zeros(n),
            group_ids=torch.arange(n),
            generators=[torch.Generator().manual_seed(100 + i) for i in range(n)],
            velocity=Linear(),
            sigma_schedule=lambda steps: torch.linspace(1.0, 0.0, steps + 1),
        )

    def gradient_leaves(self, loss_inputs: Any) -> list[Any]:
        return [loss_inputs.velocity.a]


class TestOPDAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        return hooks.omni_rl_algorithms()[0]
