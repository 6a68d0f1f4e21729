"""A DPO step whose groups all lack reward spread has no pairs: its loss and gradient are exactly zero, and the
update must skip the optimizer step, since AdamW's momentum and weight decay would otherwise still move the
LoRA weights. Driven through the forward update engine directly, without Ray, on the tiny SD3 model."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from omni_rl_dpo.config import DPOLossConfig
from omni_rl_dpo.loss import DPOLoss

from omni_rl.batch import RolloutBatch
from omni_rl.config.schema import OptimConfig
from omni_rl.context import BuildContext
from omni_rl.engine.forward_update import ForwardUpdate
from omni_rl.engine.optim import build_optimizer
from omni_rl.engine.stepping import merge_stats

PROMPTS = ["a red square", "a red square", "a blue circle", "a blue circle"]
GROUP_IDS = torch.tensor([0, 0, 1, 1])


@pytest.fixture(scope="module")
def trained_model(tiny_sd3_path: Path):
    """A model of this module's own (the shared one must not be trained)."""
    from omni_rl_sd3.config import SD3Config
    from omni_rl_sd3.model import build_sd3_model

    return build_sd3_model(SD3Config(path=str(tiny_sd3_path), lora_rank=4), BuildContext(device="cpu"))


def _batch(model) -> RolloutBatch:
    latents = torch.randn((len(PROMPTS), *model.latent_shape(32, 32)), generator=torch.Generator().manual_seed(0))
    return RolloutBatch(
        prompts=PROMPTS,
        group_ids=GROUP_IDS,
        seeds=torch.arange(len(PROMPTS)),
        images=torch.zeros(len(PROMPTS), 32, 32, 3, dtype=torch.uint8),
        final_latents=latents,
        conditioning=model.encode_prompts(PROMPTS, guidance_scale=1.0),
    )


def _run(engine: ForwardUpdate, loss: DPOLoss, batch: RolloutBatch, rewards: list[float], step: int) -> dict:
    values = torch.tensor(rewards)
    extras = loss.prepare(values, torch.zeros_like(values), GROUP_IDS)
    return engine.run(batch, values, torch.zeros_like(values), extras, step=step, generator=torch.Generator())


def _snapshot(model, optimizer: torch.optim.Optimizer) -> tuple[list[torch.Tensor], dict]:
    weights = [p.detach().clone() for p in model.trainable_parameters()]
    return weights, copy.deepcopy(optimizer.state_dict())


def test_a_step_without_pairs_leaves_weights_and_optimizer_state_unchanged(trained_model) -> None:
    model = trained_model
    loss = DPOLoss(DPOLossConfig(beta=1000.0))
    loss.setup(model)
    optim = OptimConfig(lr=1e-3, weight_decay=0.1, micro_batch=4)
    optimizer = build_optimizer(model.trainable_parameters(), optim)
    engine = ForwardUpdate(model, loss, optimizer, optim, seed=0)
    batch = _batch(model)

    # a step with a preference in each group: one real optimizer step, which leaves AdamW momentum behind
    before_first, _ = _snapshot(model, optimizer)
    first = merge_stats([_run(engine, loss, batch, [1.0, 0.0, 0.0, 1.0], step=1)])
    assert first["pairs"] == 2.0 and first["optimizer_steps"] == 1.0 and first["no_signal_steps"] == 0.0
    after_first, state = _snapshot(model, optimizer)
    assert any(not torch.equal(a, b) for a, b in zip(before_first, after_first, strict=True))
    assert state["state"], "the first step must have created AdamW state for this test to mean anything"

    # every group tied: no pairs, a zero loss, and no optimizer step
    stats = _run(engine, loss, batch, [0.5, 0.5, 0.3, 0.3], step=2)
    weights, new_state = _snapshot(model, optimizer)
    for before, after in zip(after_first, weights, strict=True):
        assert torch.equal(before, after), "a step without training signal moved the LoRA weights"
    assert new_state["state"].keys() == state["state"].keys()
    for key, entry in state["state"].items():
        for name, value in entry.items():
            assert torch.equal(torch.as_tensor(new_state["state"][key][name]), torch.as_tensor(value)), name
    assert all(p.grad is None for p in model.trainable_parameters())
    metrics = merge_stats([stats])
    assert metrics["pairs"] == 0.0 and metrics["groups_skipped"] == 2.0
    assert metrics["loss"] == 0.0
    assert metrics["no_signal_steps"] == 1.0
    assert metrics["optimizer_steps"] == 0.0 and metrics["skipped_steps"] == 0.0
    assert engine.updates_done == 1
