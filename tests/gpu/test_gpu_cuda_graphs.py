"""``[model] options.cuda_graphs`` on a real GPU (issue 29): each tiny pipeline's graphed rollout gives the eager
rollout's images and log-probs (a replay runs the kernels the capture recorded, so float32 agrees to the last bits
up to cuBLAS's choice of algorithm under capture), every call after the first per shape is a replay, and the first
update's on-policy ratio is exactly 1 (the old log-probs are recomputed through the trained forward)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omni_rl_pipelines.testing import first_update_ratio

from omni_rl import build
from omni_rl.context import BuildContext
from omni_rl.protocols import RolloutRequest

PROMPTS = ["a red circle", "a red circle", "two blue squares", "two blue squares"]
ROLLOUT = {
    "sd3": {"height": 32, "width": 32, "cfg": 4.5},
    "flux": {"height": 32, "width": 32, "cfg": 1.0},
    "qwen_image": {"height": 32, "width": 32, "cfg": 4.0},
    "wan": {"height": 32, "width": 32, "num_frames": 5, "cfg": 4.0},
}


def _request() -> RolloutRequest:
    return RolloutRequest(prompts=PROMPTS, group_ids=[0, 0, 1, 1], seeds=[3, 4, 5, 6], step=1, mode="train")


def _sampler():
    return build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 2], "window_mode": "fixed"})


def _model(name: str, path: Path, graphs: bool):
    if not torch.cuda.is_available():
        pytest.skip("cuda_graphs needs a CUDA device (refused on the CPU; tests/integration/test_cuda_graphs.py)")
    options = {"path": str(path), "lora_rank": 4, "cuda_graphs": graphs}
    model = build("model", name, options, ctx=BuildContext(device="cuda"))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # LoRA B starts at zero; random B makes the adapters part of what is checked
        for param in model.trainable_parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.05)
    return model


@pytest.mark.parametrize("name", sorted(ROLLOUT))
def test_graphed_rollout_matches_eager_on_gpu(name: str, tiny_models: dict[str, Path]) -> None:
    options = {"group_size": 2, "steps": 3, "batch_size": 3, **ROLLOUT[name]}
    eager, graphed = _model(name, tiny_models[name], False), _model(name, tiny_models[name], True)
    a = build("rollout", "diffusers", options).generate(eager, _sampler(), _request())
    b = build("rollout", "diffusers", options).generate(graphed, _sampler(), _request())
    assert graphed.graphs.captures >= 2 and graphed.graphs.replays > graphed.graphs.captures
    torch.testing.assert_close(b.final_latents, a.final_latents, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(b.trajectory.log_probs, a.trajectory.log_probs, atol=1e-3, rtol=1e-5)
    assert (b.images.int() - a.images.int()).abs().max() <= 1


def test_first_ratio_is_one_with_cuda_graphs(tiny_models: dict[str, Path]) -> None:
    model, sampler = _model("sd3", tiny_models["sd3"], True), _sampler()
    options = {"group_size": 2, "steps": 3, "batch_size": 4, **ROLLOUT["sd3"]}
    batch = build("rollout", "diffusers", options).generate(model, sampler, _request())
    ratio, old = first_update_ratio(model, sampler, batch)
    assert ratio == 1.0
    torch.testing.assert_close(old, batch.trajectory.log_probs.float(), atol=1e-3, rtol=0)  # graphed vs trained
