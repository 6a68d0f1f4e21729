"""The loss inside omni-rl's forward update engine, without Ray: the schedule at the rollout's image size,
distinct timesteps per sample within an epoch, and the old adapter refreshed once per step (or per
optimizer step) with the decay of the optimizer-step count."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from omni_rl_diffusion_nft.config import DiffusionNFTLossConfig
from omni_rl_diffusion_nft.loss import DiffusionNFTLoss

from omni_rl.batch import Conditioning, RolloutBatch
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.forward_update import ForwardUpdate

N, SHAPE, NUM_STEPS, TIMESTEPS = 4, (1, 2, 2), 4, 3


class AdapterModel:
    """v = 0.5·x + (the active adapter's offset); "default" is a trained parameter, "old" a frozen copy.

    Records (sample id, sigma) of every "old"-adapter forward, and the image size of every schedule request.
    """

    def __init__(self) -> None:
        self.device = torch.device("cpu")
        self.dtype = torch.float32
        self.adapters: dict[str, torch.Tensor] = {"default": torch.nn.Parameter(torch.zeros(SHAPE))}
        self.active = "default"
        self.old_forwards: list[tuple[int, float]] = []
        self.schedule_sizes: list[tuple[int, int, int]] = []
        #: (decay, the trained weights at the time) of every blend
        self.blends: list[tuple[float, torch.Tensor]] = []

    def predict_velocity(self, x: torch.Tensor, sigma: torch.Tensor, cond: Conditioning, g: float) -> torch.Tensor:
        if self.active == "old":
            ids = cond.tensors["id"].tolist()
            self.old_forwards += [(int(i), float(s)) for i, s in zip(ids, sigma.tolist(), strict=True)]
        return 0.5 * x + self.adapters[self.active]

    def sigma_schedule(self, num_steps: int, height: int, width: int) -> torch.Tensor:
        self.schedule_sizes.append((num_steps, height, width))
        s = torch.linspace(1.0, 0.0, num_steps + 1)
        return 3.0 * s / (1.0 + 2.0 * s)

    def add_adapter(self, name: str, *, copy_from: str | None = "default") -> None:
        self.adapters[name] = self.adapters[copy_from].detach().clone()

    @contextmanager
    def use_adapter(self, name: str) -> Iterator[None]:
        previous, self.active = self.active, name
        try:
            yield
        finally:
            self.active = previous

    def blend_adapter(self, target: str, source: str = "default", *, decay: float) -> None:
        self.blends.append((decay, self.adapters[source].detach().clone()))
        with torch.no_grad():
            self.adapters[target] = decay * self.adapters[target] + (1 - decay) * self.adapters[source].detach()


def _batch() -> RolloutBatch:
    generator = torch.Generator().manual_seed(0)
    return RolloutBatch(
        prompts=[f"p{i // 2}" for i in range(N)],
        group_ids=torch.arange(N) // 2,
        seeds=torch.arange(N),
        images=torch.zeros(N, 24, 40, 3, dtype=torch.uint8),
        final_latents=torch.randn((N, *SHAPE), generator=generator),
        conditioning=Conditioning({"id": torch.arange(N)}),
    )


def _run(mini_batch: int, refresh: str) -> tuple[AdapterModel, torch.Tensor, torch.Tensor, dict[str, Any]]:
    model = AdapterModel()
    loss = DiffusionNFTLoss(
        DiffusionNFTLossConfig(num_steps=NUM_STEPS, timesteps=TIMESTEPS, kl_coef=0.0, refresh=refresh)
    )
    loss.setup(model)
    optimizer = torch.optim.SGD([model.adapters["default"]], lr=0.1)
    engine = ForwardUpdate(model, loss, optimizer, OptimConfig(micro_batch=2, mini_batch=mini_batch), seed=5)
    advantages = torch.tensor([1.0, -1.0, 2.0, -2.0])
    extras = loss.prepare(torch.zeros(N), advantages, torch.arange(N) // 2)
    theta_before = model.adapters["default"].detach().clone()
    stats = engine.run(_batch(), torch.zeros(N), advantages, extras, step=3, generator=torch.Generator().manual_seed(1))
    return model, theta_before, model.adapters["default"].detach().clone(), stats


def test_each_sample_trains_distinct_schedule_timesteps_at_the_rollout_size() -> None:
    model, *_ = _run(mini_batch=0, refresh="update")
    assert set(model.schedule_sizes) == {(NUM_STEPS, 24, 40)}
    grid = model.sigma_schedule(NUM_STEPS, 0, 0)[:-1].tolist()
    per_sample: dict[int, list[float]] = {}
    for sample, sigma in model.old_forwards:
        per_sample.setdefault(sample, []).append(sigma)
    assert sorted(per_sample) == list(range(N))
    for sigmas in per_sample.values():
        assert len(sigmas) == TIMESTEPS
        assert len({round(s, 6) for s in sigmas}) == TIMESTEPS, "a sample drew the same t twice in an epoch"
        assert all(min(abs(s - g) for g in grid) < 1e-6 for s in sigmas)


@pytest.mark.parametrize(
    ("mini_batch", "refresh", "decays"),
    [
        (0, "update", [0.001]),  # one optimizer step, one refresh at d(1)
        (2, "update", [0.002]),  # two optimizer steps, one refresh at d(2): the reference's once per round
        (2, "optimizer_step", [0.001, 0.002]),  # a refresh after each optimizer step
    ],
)
def test_old_adapter_refresh_in_the_engine(mini_batch: int, refresh: str, decays: list[float]) -> None:
    model, theta_before, theta_after, stats = _run(mini_batch, refresh)
    assert not torch.equal(theta_before, theta_after)
    assert [d for d, _ in model.blends] == pytest.approx(decays)
    assert torch.equal(model.blends[-1][1], theta_after)  # the last refresh saw the step's final weights
    expected = theta_before  # setup copied θ₀ into old
    for decay, theta in model.blends:
        expected = decay * expected + (1 - decay) * theta
    torch.testing.assert_close(model.adapters["old"], expected, rtol=1e-6, atol=1e-8)
    assert len(stats["grad_norms"]) == (1 if mini_batch == 0 else 2)
