"""omni-rl's conformance suites on the diffusion_nft loss, the diffusion_nft preset and the hooks module."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import torch
from omni_rl_diffusion_nft import hooks

from omni_rl.batch import ForwardLossInputs
from omni_rl.registry import Registry
from omni_rl.specs import AlgorithmSpec, ComponentSpec, LossSpec
from omni_rl.testing import AlgorithmConformance, LossConformance, PluginConformance


class TestDiffusionNFTPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_diffusion_nft.hooks"


class SuiteVelocity:
    """Policy views for the suite: v = 0.5·x_t + offset; the current view's offset is a leaf with a gradient."""

    def __init__(self, shape: tuple[int, ...], generator: torch.Generator) -> None:
        self.theta = (0.1 * torch.randn(shape, generator=generator)).requires_grad_(True)
        self.old = self.theta.detach() + 0.05 * torch.randn(shape, generator=generator)
        self.reference = 0.1 * torch.randn(shape, generator=generator)

    def __call__(self, view: str, x_t: torch.Tensor, sigma: torch.Tensor, samples: Any = None) -> torch.Tensor:
        offset = {"current": self.theta, "old": self.old, "reference": self.reference}[view]
        return 0.5 * x_t + offset


class TestDiffusionNFTLoss(LossConformance):
    @pytest.fixture
    def spec(self) -> LossSpec:
        (spec,) = hooks.omni_rl_losses()
        return spec

    @pytest.fixture(
        params=[
            {},
            {"kl_coef": 0.0, "timesteps": 2},
            {"reward_mode": "binary", "beta": 0.1, "old_decay": "delayed_ramp", "refresh": "optimizer_step"},
        ],
        ids=["defaults", "no-kl", "binary-small-beta"],
    )
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param

    @pytest.fixture
    def loss_inputs(self, component: Any) -> ForwardLossInputs:
        """A micro-batch as the forward update builds it: x0, per-sample generators, the views, the prepared
        reward probabilities and the model's (SD3-like shifted) sigma schedule."""
        n = self.batch_size
        generator = torch.Generator().manual_seed(0)
        shape = (n, *self.latent_shape)
        advantages = torch.randn(n, generator=generator)
        group_ids = torch.arange(n) // 2

        def sigma_schedule(num_steps: int) -> torch.Tensor:
            s = torch.linspace(1.0, 0.0, num_steps + 1)
            return 3.0 * s / (1.0 + 2.0 * s)

        return ForwardLossInputs(
            x0=torch.randn(shape, generator=generator),
            advantages=advantages,
            rewards=torch.randn(n, generator=generator),
            group_ids=group_ids,
            generators=[torch.Generator().manual_seed(100 + i) for i in range(n)],
            velocity=SuiteVelocity(shape, generator),
            timestep_index=component.requirements.timesteps - 1,
            extras=component.prepare(torch.zeros(n), advantages, group_ids),
            epoch_generators=[torch.Generator().manual_seed(200 + i) for i in range(n)],
            sigma_schedule=sigma_schedule,
        )

    def gradient_leaves(self, loss_inputs: Any) -> list[Any]:
        return [loss_inputs.velocity.theta]

    def test_kl_coef_selects_the_reference_view(self, component: Any, options: dict[str, Any]) -> None:
        assert ("reference" in component.requirements.views) == (options.get("kl_coef", 1e-4) > 0)


class TestDiffusionNFTAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        (spec,) = hooks.omni_rl_algorithms()
        return spec

    def test_the_preset_sets_the_reference_recipe(self, spec: AlgorithmSpec, registry: Registry) -> None:
        config = self.resolved_preset(spec, registry)
        assert config.optim.lr == 3e-4
        loss = config.components["loss"].options
        assert (loss.beta, loss.kl_coef, loss.old_decay, loss.train_timesteps) == (1.0, 1e-4, "ramp", 9)


def test_every_component_has_a_suite() -> None:
    covered = {"omni_rl_losses": {"diffusion_nft"}, "omni_rl_algorithms": {"diffusion_nft"}}
    for hook, names in covered.items():
        records: list[ComponentSpec] = getattr(hooks, hook)()
        assert {record.name for record in records} == names, hook
