"""The self-checks of docs/math.md#self-checks for ``flux_kontext`` through the real ``diffusers`` rollout backend,
samplers and update engine, on batches whose prompts carry sources of different sizes (so chunks and micro-batches
mix condition lengths, padded by ``Conditioning.concat``).

1. A full ODE rollout equals ``FluxKontextPipeline.__call__`` for the same source, prompt, seed, steps and
   guidance, to 1e-5 in latents and 1 level in pixels. The pipeline gets ``_auto_resize=False`` (its ~1 MP snap
   off: the condition keeps its size floored to 2 x the VAE factor, which is the model's rule for a source within
   ``condition_max_area``) and ``max_area = height x width`` (``__call__`` rescales its *output* to ``max_area``,
   1 MP by default); with the distilled guidance embedding alone, and with true CFG on top.
2. A source above ``condition_max_area`` equals the pipeline given the source resized as the model resizes it
   (the pipeline's own ``image_processor.resize``, to the area rule's size).
3. On-policy ratio: re-scoring the stored rollout steps with unchanged weights gives ratio 1 to 1e-6 (flow_sde,
   with and without true CFG), and the first Flow-GRPO update's mean ratio is 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from kontext_helpers import build_kontext, pipe_edit, source
from omni_rl_flux.latents import pack
from omni_rl_pipelines.testing import first_update_ratio

from omni_rl import build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest

PROMPTS = ["make the cat red", "make the cat red", "add a hat", "add a hat"]
SEEDS = [11, 12, 13, 14]
#: two sources of different sizes (40 x 48 and 32 x 24 px: 30 and 12 condition tokens), one per group
SOURCES = [source(40, 48, seed=1), source(32, 24, seed=2)]


def _rollout(model: Any, sampler: Any, cfg: float, *, mode: str, sources: list | None = None) -> Any:
    backend = build(
        "rollout",
        "diffusers",
        {"group_size": 2, "steps": 4, "eval_steps": 4, "height": 32, "width": 32, "cfg": cfg, "batch_size": 3},
    )
    images = sources or SOURCES
    request = RolloutRequest(
        prompts=PROMPTS,
        group_ids=[0, 0, 1, 1],
        seeds=SEEDS,
        step=1,
        mode=mode,
        run_seed=0,
        conditions=[(images[0],), (images[0],), (images[1],), (images[1],)],
    )
    return backend.generate(model, sampler, request)


@pytest.mark.parametrize("cfg", [1.0, 2.0], ids=["distilled_guidance", "true_cfg"])
def test_ode_rollout_equals_the_pipeline(kontext_model, kontext_pipe, cfg: float) -> None:
    batch = _rollout(kontext_model, build("sampler", "ode", {}), cfg, mode="eval")
    assert batch.conditioning.tensors["condition_size"].tolist() == [[10, 12]] * 2 + [[8, 6]] * 2
    for k in (0, 2):
        latents, images = pipe_edit(kontext_pipe, PROMPTS[k], SOURCES[k // 2], steps=4, seed=SEEDS[k], cfg=cfg)
        torch.testing.assert_close(pack(batch.final_latents[k : k + 1]), latents, rtol=0, atol=1e-5)
        assert (batch.images[k].int() - images[0].int()).abs().max() <= 1
    # the source reaches the output: another source, same prompts and seeds, other images
    other = _rollout(kontext_model, build("sampler", "ode", {}), cfg, mode="eval", sources=SOURCES[::-1])
    assert not torch.allclose(other.final_latents[0], batch.final_latents[0], atol=1e-3)


def test_a_downscaled_source_equals_the_pipeline_on_the_source_resized_alike(tiny_kontext_path, kontext_pipe) -> None:
    model = build_kontext(tiny_kontext_path, condition_max_area=24 * 24)
    large = source(48, 40, seed=5)
    height, width = model.condition_size(48, 40)
    assert (height, width) == (24, 16)
    resized = kontext_pipe.image_processor.resize(_pil(large), height, width)
    conditioning = model.encode_conditions([PROMPTS[0]], [(large,)], guidance_scale=1.0)
    sigmas = model.sigma_schedule(4, 32, 32)
    x = torch.randn((1, *model.latent_shape(32, 32)), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        for i in range(4):
            x = x + model.predict_velocity(x, sigmas[i].expand(1), conditioning, 1.0) * (sigmas[i + 1] - sigmas[i])
    latents, _ = pipe_edit(kontext_pipe, PROMPTS[0], np.asarray(resized), steps=4, seed=7)
    torch.testing.assert_close(pack(x), latents, rtol=0, atol=1e-5)


@pytest.mark.parametrize("cfg", [1.0, 2.0], ids=["distilled_guidance", "true_cfg"])
def test_on_policy_ratio_is_one(kontext_model, cfg: float) -> None:
    sampler = build("sampler", "flow_sde", {"noise_level": 0.9, "window_size": 3, "window_range": [0, 4]})
    batch = _rollout(kontext_model, sampler, cfg, mode="train")
    assert batch.trajectory is not None and batch.trajectory.log_probs.shape == (4, 3)
    loss = build("loss", "flow_grpo", {})
    params = list(kontext_model.trainable_parameters())
    engine = TrajectoryUpdate(kontext_model, sampler, loss, torch.optim.AdamW(params), OptimConfig(micro_batch=3))
    recomputed, _ = engine.old_views(batch, keep_steps=False)
    assert torch.max(torch.abs(torch.exp(recomputed - batch.trajectory.log_probs) - 1)).item() < 1e-6
    ratio, _ = first_update_ratio(kontext_model, sampler, batch)
    assert abs(ratio - 1.0) < 1e-6


def test_conditions_of_two_sizes_take_one_transformer_call_each(kontext_model) -> None:
    """Padding never enters attention: a batch mixing two condition sizes runs one call per size, and each sample
    gets the velocity it gets alone."""
    conditioning = kontext_model.encode_conditions(PROMPTS[1:3], [(SOURCES[0],), (SOURCES[1],)], guidance_scale=1.0)
    latents = torch.randn((2, 16, 8, 8), generator=torch.Generator().manual_seed(0))
    sigmas = torch.tensor([0.9, 0.4])
    before = kontext_model.transformer_calls
    with torch.no_grad():
        together = kontext_model.predict_velocity(latents, sigmas, conditioning, 1.0)
        assert kontext_model.transformer_calls - before == 2
        for i in range(2):
            alone = kontext_model.predict_velocity(latents[i : i + 1], sigmas[i : i + 1], conditioning.index([i]), 1.0)
            torch.testing.assert_close(together[i : i + 1], alone, rtol=1e-5, atol=1e-5)


def _pil(image: Any) -> Any:
    from PIL import Image

    return Image.fromarray(image)
