"""The dance_grpo preset's training step on a real (tiny, random) SD3 with LoRA, without Ray: rollout with the
preset's window and timestep_fraction, the worker's column selection, then one update of the preset's loss with the
KL term on, for dance_sde and for the other windowed samplers the preset can take (flow_sde, cps).

On-policy and with the LoRA at its zero init, the current policy is the reference, so the KL is 0 and the ratio 1;
the update must run on exactly K = ceil(0.6 * 5) = 3 columns per sample and move the LoRA weights.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from omni_rl_dance_grpo.presets import dance_grpo_defaults

from omni_rl import build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory import keep_trained_steps
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

STEPS = 6


@pytest.fixture(scope="module")
def tiny_sd3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    return Path(build_tiny_sd3_pipeline(tmp_path_factory.mktemp("sd3") / "tiny", seed=0))


def _rollout_options() -> dict[str, Any]:
    options = dict(dance_grpo_defaults()["rollout"]["options"])
    return {**options, "group_size": 2, "steps": STEPS, "height": 32, "width": 32, "batch_size": 4}


@pytest.mark.parametrize(
    ("sampler_name", "noise_level"), [("dance_sde", 0.3), ("flow_sde", 0.7), ("cps", 0.8)], ids=lambda v: str(v)
)
def test_one_update_with_the_kl_term(tiny_sd3: Path, sampler_name: str, noise_level: float) -> None:
    model = build("model", "sd3", {"path": str(tiny_sd3), "lora_rank": 4})
    preset = dance_grpo_defaults()
    sampler = build("sampler", sampler_name, {**preset["sampler"]["options"], "noise_level": noise_level})
    backend = build("rollout", "diffusers", _rollout_options())
    request = RolloutRequest(
        prompts=["a red circle"] * 2 + ["two blue squares"] * 2, group_ids=[0, 0, 1, 1], seeds=[1, 2, 3, 4], step=1
    )
    batch = keep_trained_steps(backend.generate(model, sampler, request), sampler, request.step, request.run_seed)
    assert batch.trajectory is not None and batch.trajectory.log_probs.shape == (4, 3)
    assert int(batch.trajectory.step_indices.max()) <= STEPS - 2  # the last step is never in the window

    loss = build("loss", "flow_grpo", {**preset["loss"]["options"], "kl_coef": 0.04})
    assert "reference" in loss.requirements.views
    params = list(model.trainable_parameters())
    before = [p.detach().clone() for p in params]
    engine = TrajectoryUpdate(model, sampler, loss, torch.optim.AdamW(params, lr=1e-3), OptimConfig(micro_batch=4))
    advantages = build("advantage", "grpo", preset["advantage"]["options"])(
        torch.tensor([0.1, 0.9, 0.4, 0.2]), torch.tensor(request.group_ids)
    )
    stats = engine.run(batch, advantages, {}, generator=torch.Generator().manual_seed(0))

    means = {k: stats["sums"][k] / stats["counts"][k] for k in stats["sums"]}
    assert abs(means["ratio_mean"] - 1) < 1e-6 and means["kl"] == pytest.approx(0.0, abs=1e-10)
    assert len(stats["grad_norms"]) == 1 and math.isfinite(stats["grad_norms"][0]) and stats["grad_norms"][0] > 0
    assert any(not torch.equal(p, b) for p, b in zip(params, before, strict=True))
