"""omni-rl's conformance suites on every component of omni-rl-dpo, and on its hooks module."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest
import torch
from omni_rl_dpo import hooks

from omni_rl.batch import ForwardLossInputs
from omni_rl.errors import ConfigError
from omni_rl.protocols import DiffusionModel, Loss, RolloutBackend, RolloutRequest, Sampler
from omni_rl.specs import AlgorithmSpec, ComponentSpec, LossSpec, RolloutSpec
from omni_rl.testing import AlgorithmConformance, LossConformance, PluginConformance, RolloutConformance


def _named(records: list[Any], name: str) -> Any:
    (spec,) = [record for record in records if record.name == name]
    return spec


class TestDPOPlugin(PluginConformance):
    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_dpo.hooks"


# -- loss ------------------------------------------------------------------------------------------------


class ScaledPolicy:
    """A stand-in ``velocity``: current v = a·x_t with a trainable leaf a, other views v = 0.9·x_t."""

    def __init__(self) -> None:
        self.a = torch.tensor(1.1, requires_grad=True)

    def __call__(self, view: str, x_t: torch.Tensor, sigma: torch.Tensor, samples: Any = None) -> torch.Tensor:
        return self.a * x_t if view == "current" else 0.9 * x_t


class TestDPOLoss(LossConformance):
    @pytest.fixture
    def spec(self) -> LossSpec:
        return _named(hooks.omni_rl_losses(), "dpo")

    @pytest.fixture(
        params=[
            {},
            {"pairing": "offline", "timesteps": 2},
            {"draws_per_pair": 2, "stratified": True, "timestep_range": [0.5, 1.0], "sft_weight": 0.1},
            {"loser_safeguard": 0.5, "reference": "ema"},
        ],
        ids=["online", "offline", "draws-sft", "safeguard-ema"],
    )
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param

    @pytest.fixture
    def loss_inputs(self, component: Loss) -> ForwardLossInputs:
        """``batch_size`` samples in groups of 2 with distinct rewards, so every group is a pair."""
        n = self.batch_size
        generator = torch.Generator().manual_seed(0)
        group_ids = torch.arange(n) // 2
        rewards = torch.arange(n, dtype=torch.float32) % 3
        return ForwardLossInputs(
            x0=torch.randn((n, *self.latent_shape), generator=generator),
            advantages=torch.zeros(n),
            rewards=rewards,
            group_ids=group_ids,
            generators=[torch.Generator().manual_seed(100 + i) for i in range(n)],
            velocity=ScaledPolicy(),
            extras=component.prepare(rewards, torch.zeros(n), group_ids),
        )

    def gradient_leaves(self, loss_inputs: Any) -> list[Any]:
        return [loss_inputs.velocity.a]


class TestDGPOLoss(LossConformance):
    @pytest.fixture
    def spec(self) -> LossSpec:
        return _named(hooks.omni_rl_losses(), "dgpo")

    @pytest.fixture(
        params=[{}, {"reference": "ema", "beta": 2000.0, "draws_per_group": 2, "sft_weight": 0.1}],
        ids=["frozen", "ema"],
    )
    def options(self, request: pytest.FixtureRequest) -> dict[str, Any]:
        return request.param

    @pytest.fixture
    def loss_inputs(self, component: Loss) -> ForwardLossInputs:
        """``batch_size`` samples in groups of 2 with zero-mean advantages (a last odd sample is a group of one)."""
        n = self.batch_size
        generator = torch.Generator().manual_seed(0)
        group_ids = torch.arange(n) // 2
        advantages = torch.where(torch.arange(n) % 2 == 0, 1.0, -1.0)
        if n % 2:
            advantages[-1] = 0.0
        return ForwardLossInputs(
            x0=torch.randn((n, *self.latent_shape), generator=generator),
            advantages=advantages,
            rewards=advantages,
            group_ids=group_ids,
            generators=[torch.Generator().manual_seed(100 + i) for i in range(n)],
            velocity=ScaledPolicy(),
            extras=component.prepare(advantages, advantages, group_ids),
        )

    def gradient_leaves(self, loss_inputs: Any) -> list[Any]:
        return [loss_inputs.velocity.a]


# -- rollout ---------------------------------------------------------------------------------------------


class TestPreferencePairsRollout(RolloutConformance):
    """The backend replays files, so the suite's request gets a preference file's metadata. It records no
    trajectory: the suite's trajectory check becomes a check that asking for one is refused."""

    @pytest.fixture
    def spec(self) -> RolloutSpec:
        return _named(hooks.omni_rl_rollout_backends(), "preference_pairs")

    @pytest.fixture
    def options(self) -> dict[str, Any]:
        return {"height": 32, "width": 32, "eval_steps": 2, "eval_cfg": 1.0, "batch_size": 3}

    @pytest.fixture
    def model(self, sd3_lora_model: DiffusionModel) -> DiffusionModel:
        return sd3_lora_model

    @pytest.fixture
    def sampler(self) -> Sampler:
        from omni_rl_flow_grpo.samplers.ode import ODESampler

        return ODESampler()

    @pytest.fixture
    def rollout_request(self, component: RolloutBackend, preference_set: Any, tmp_path: Path) -> RolloutRequest:
        path = preference_set(tmp_path, ["a red square", "a blue circle"])
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        group = component.group_size
        return RolloutRequest(
            prompts=[line["prompt"] for line in lines for _ in range(group)],
            group_ids=[i for i in range(len(lines)) for _ in range(group)],
            seeds=list(range(len(lines) * group)),
            step=0,
            record_trajectory=False,
            metadata=[{"chosen": line["chosen"], "rejected": line["rejected"]} for line in lines for _ in range(group)],
        )

    def test_trajectory_has_the_documented_shapes(
        self, component: RolloutBackend, model: DiffusionModel, sampler: Sampler, rollout_request: RolloutRequest
    ) -> None:
        with pytest.raises(ConfigError, match="no sampling trajectory"):
            component.generate(model, sampler, attrs.evolve(rollout_request, record_trajectory=True))


# -- algorithms ------------------------------------------------------------------------------------------


class TestDPOAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        return _named(hooks.omni_rl_algorithms(), "dpo")


class TestDPOOfflineAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        return _named(hooks.omni_rl_algorithms(), "dpo_offline")

    def test_offline_pairing_goes_with_the_preference_backend(self, spec: AlgorithmSpec) -> None:
        assert spec.defaults["rollout"]["name"] == "preference_pairs"
        assert spec.defaults["loss"]["options"]["pairing"] == "offline"


class TestDGPOAlgorithm(AlgorithmConformance):
    complete_with: ClassVar[dict[str, Any]] = {
        "model": {"name": "sd3", "options": {"path": "unused/by/resolution"}},
        "reward": [{"name": "jpeg_compressibility"}],
    }

    @pytest.fixture
    def spec(self) -> AlgorithmSpec:
        return _named(hooks.omni_rl_algorithms(), "dgpo")


def test_every_component_has_a_suite() -> None:
    """A component added to hooks.py without a suite above fails here rather than going unchecked."""
    covered = {
        "omni_rl_losses": {"dpo", "dgpo"},
        "omni_rl_rollout_backends": {"preference_pairs"},
        "omni_rl_algorithms": {"dpo", "dpo_offline", "dgpo"},
    }
    for hook, names in covered.items():
        records: list[ComponentSpec] = getattr(hooks, hook)()
        assert {record.name for record in records} == names, hook
