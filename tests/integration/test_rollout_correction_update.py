"""Rollout correction in the update, on a run with a known weight change: a batch sampled with weights A, the
policy then moved to weights B. ``bypass`` hands the loss the rollout's log-probs (A's); ``decoupled`` recomputes
with the behaviour weights and weights each term by min(exp(ℓᵒ − ℓʳ), C); recomputing with B instead gives the
hand-computed IS weights of B against A."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from omni_rl import build
from omni_rl.config.schema import OptimConfig, RolloutCorrectionConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest
from omni_rl.runtime.weights import capture, swapped


class Recording:
    """flow_grpo, remembering what each call received."""

    def __init__(self, loss) -> None:
        self.loss, self.requirements, self.seen = loss, loss.requirements, []

    def prepare(self, *args):
        return {}

    def __call__(self, inputs):
        self.seen.append((inputs.old_log_prob.detach().clone(), inputs.weights))
        return self.loss(inputs)


@pytest.fixture(scope="module")
def setup(tiny_sd3: Path):
    model = build("model", "sd3", {"path": str(tiny_sd3), "lora_rank": 4})
    sampler = build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 3]})
    backend = build(
        "rollout", "diffusers", {"group_size": 2, "steps": 3, "height": 32, "width": 32, "cfg": 1.0, "batch_size": 4}
    )
    request = RolloutRequest(
        prompts=["a red circle"] * 2 + ["a blue square"] * 2,
        group_ids=[0, 0, 1, 1],
        seeds=[1, 2, 3, 4],
        step=1,
        run_seed=0,
    )
    with torch.no_grad():  # weights A: move the LoRA B matrices off zero so the adapters matter
        for p in model.trainable_parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = backend.generate(model, sampler, request)
    weights_a = capture(model, 0)
    with torch.no_grad():  # weights B: a known change of the policy after the batch was sampled
        for p in model.trainable_parameters():
            p.add_(0.5 * torch.randn_like(p))
    return model, sampler, batch, weights_a


def _rows(t: torch.Tensor) -> torch.Tensor:
    return t[torch.argsort(t[:, 0])]


def _engine(model, sampler, **correction):
    loss = Recording(build("loss", "flow_grpo", {"clip_ratio": 1e-2}))
    optimizer = torch.optim.SGD(list(model.trainable_parameters()), lr=0.0)  # lr 0: B stays B
    config = RolloutCorrectionConfig(**correction)
    return TrajectoryUpdate(model, sampler, loss, optimizer, OptimConfig(micro_batch=4), correction=config), loss


def test_bypass_gives_the_loss_the_rollout_log_probs(setup) -> None:
    model, sampler, batch, _ = setup
    engine, loss = _engine(model, sampler, mode="bypass")
    engine.run(batch, torch.tensor([1.0, -1.0, 0.5, -0.5]), {}, generator=torch.Generator().manual_seed(0))
    seen = torch.stack([old for old, _ in loss.seen], dim=1)
    # the update visits the samples in a drawn order: compare the rows as a set
    assert torch.equal(_rows(seen), _rows(batch.trajectory.log_probs.float()))
    assert all(w is None for _, w in loss.seen)


def test_decoupled_with_the_behaviour_weights_is_identity_and_with_newer_weights_hand_computed(setup) -> None:
    model, sampler, batch, weights_a = setup
    rollout = batch.trajectory.log_probs.float()
    engine, _ = _engine(model, sampler, mode="decoupled", is_threshold=1e9)
    old, _, weights, diag = engine._old_log_probs(batch, swapped(model, weights_a))
    assert torch.max(torch.abs(old - rollout)) < 1e-5  # the behaviour version's recompute
    assert torch.max(torch.abs(weights - 1)) < 1e-5 and diag["rejected_steps"] == 0
    # the current weights (B) are not the behaviour version: the weights are exp(ℓ_B − ℓ_A), truncated at C
    engine, loss = _engine(model, sampler, mode="decoupled", is_threshold=1.002)
    recomputed_b, _ = engine.old_views(batch, keep_steps=False)
    expected = torch.exp(recomputed_b.double() - rollout.double()).clamp(max=1.002).float()
    assert torch.max(torch.abs(recomputed_b - rollout)) > 1e-3  # the weight change is visible
    engine.run(batch, torch.tensor([1.0, -1.0, 0.5, -0.5]), {}, generator=torch.Generator().manual_seed(0))
    seen = torch.stack([w for _, w in loss.seen], dim=1)
    assert torch.allclose(seen.flatten().sort().values, expected.flatten().sort().values, atol=1e-6)


def test_a_bf16_rollout_is_what_the_correction_measures(setup) -> None:
    """``[rollout] options.dtype = "bfloat16"``: the rollout's log-probs differ from the float32 recompute with the
    same weights (the one-engine case rollout correction exists for), and the float32 rollout's do not."""
    model, sampler, _, _ = setup
    request = RolloutRequest(prompts=["a red circle"] * 2, group_ids=[0, 0], seeds=[5, 6], step=1, run_seed=0)
    options = {"group_size": 2, "steps": 3, "height": 32, "width": 32, "cfg": 1.0, "batch_size": 2}
    engine, _ = _engine(model, sampler, mode="decoupled")
    deltas = {}
    for dtype in ("model", "bfloat16"):
        batch = build("rollout", "diffusers", {**options, "dtype": dtype}).generate(model, sampler, request)
        recomputed, _ = engine.old_views(batch, keep_steps=False)
        deltas[dtype] = float(torch.max(torch.abs(recomputed - batch.trajectory.log_probs)))
    assert deltas["model"] < 1e-5 < 1e-3 < deltas["bfloat16"], deltas
