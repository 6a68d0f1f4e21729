"""DiffusionNFT's training rollouts sample with the old adapter, not the current one: the policy worker, driven
directly as the driver would (no Ray), after a refresh with decay > 0 has left old ≠ current.

The loss only declares ``rollout_view = "old"``; this checks that the worker acts on it: a training rollout's
latents and images are those of sampling under the old adapter and differ from the current policy's, while a
validation rollout samples the current policy.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from omni_rl import load_config
from omni_rl.protocols import RolloutRequest
from omni_rl.runtime.worker import PolicyWorker

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_diffusion_nft.toml"
PROMPTS = ["a red circle", "a red circle", "two blue squares", "two blue squares"]
GROUPS = [0, 0, 1, 1]


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> PolicyWorker:
    """The example's worker on a tiny random SD3 at 32 px, 2 sampling steps, LoRA rank 4 on attention."""
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    tmp = tmp_path_factory.mktemp("nft-old-rollout")
    tiny = build_tiny_sd3_pipeline(tmp / "tiny", seed=0)
    sets = {
        "run.output_dir": str(tmp / "run"),
        "model.name": '"sd3"',  # the example's model is the Qwen-Image shapes one
        "model.options.path": str(tiny),
        "model.options.lora_rank": "4",
        "model.options.lora_target_modules": '["attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0"]',
        "rollout.options.height": "32",
        "rollout.options.width": "32",
        "rollout.options.group_size": "2",
        "rollout.options.steps": "2",
        "rollout.options.eval_steps": "2",
        "rollout.options.batch_size": "4",
        "sampler.options.window_range": "[0, 1]",
        "sampler.options.window_size": "1",
        "loss.options.num_steps": "2",
        "loss.options.timesteps": "1",
        "loss.options.old_decay": '"ramp"',
    }
    config = load_config(EXAMPLE, [f"{key}={value}" for key, value in sets.items()])
    return PolicyWorker(config)


def _request(mode: str) -> RolloutRequest:
    return RolloutRequest(
        prompts=PROMPTS,
        group_ids=GROUPS,
        seeds=[11, 12, 13, 14],
        step=1 if mode == "train" else -1,
        mode=mode,  # type: ignore[arg-type]
        record_trajectory=False,
    )


def _sample(worker: PolicyWorker, request: RolloutRequest, adapter: str | None):
    """What the rollout backend gives under a given adapter (None: the current policy), outside the worker."""
    model = worker.model
    if adapter is None:
        return worker.rollout.generate(model, worker.sampler, request)
    with model.use_adapter(adapter):
        return worker.rollout.generate(model, worker.sampler, request)


def test_training_rollouts_sample_with_the_refreshed_old_adapter(worker: PolicyWorker) -> None:
    assert worker.requirements.rollout_view == "old"
    model = worker.model
    # "training" moved the current adapter away from the old copy that setup made of its initial weights ...
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.trainable_parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.3)
    # ... and the refresh after update 400 blends with decay 0.4: old = 0.4·old + 0.6·current, not current
    assert worker.loss.refresh_old(model, 400) == pytest.approx(0.4)

    request = _request("train")
    out = worker.rollout_shard(request)
    kept = worker._batch  # what the update will train on
    old = _sample(worker, request, "old")
    current = _sample(worker, request, None)

    assert torch.equal(kept.final_latents, old.final_latents)
    assert torch.equal(torch.from_numpy(out.images), old.images)
    difference = (kept.final_latents - current.final_latents).abs().max()
    assert difference > 1e-3, "old and current sampled the same latents: the test would not tell them apart"
    assert not torch.equal(old.images, current.images)

    # validation samples the policy being trained
    validation = worker.rollout_shard(_request("eval"))
    expected = _sample(worker, _request("eval"), None)
    assert torch.equal(torch.from_numpy(validation.images), expected.images)
