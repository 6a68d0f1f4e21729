"""The trajectory update engine's options on the tiny SD3, in-process (no Ray): reusing the rollout's old
log-probs, the KL to the reference view (LoRA off), gradient accumulation across micro-batch sizes, and the
number of optimizer steps per training step (the policy worker driven directly, as the driver would)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs
import numpy as np
import pytest
import torch

from omni_rl import build, load_config
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.protocols import RolloutRequest
from omni_rl.runtime.worker import PolicyWorker

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"
PROMPTS = ["a red circle", "a red circle", "two blue squares", "two blue squares"] * 2
GROUPS = [0, 0, 1, 1, 2, 2, 3, 3]
N = len(PROMPTS)
#: fixed advantages, all different so that every sample's gradient counts
ADVANTAGES = torch.tensor([1.2, -0.4, 0.7, -1.5, 0.3, -0.9, 1.8, -0.2])


@pytest.fixture(scope="module")
def model(tiny_sd3: Path):
    """The tiny SD3 with a LoRA moved away from its zero init, so the policy differs from the reference."""
    model = build("model", "sd3", {"path": str(tiny_sd3), "lora_rank": 4})
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in model.trainable_parameters():
            p.copy_(torch.randn(p.shape, generator=generator) * 0.5)
    return model


@pytest.fixture
def weights(model) -> Iterator[list[torch.Tensor]]:
    """The LoRA weights before the test; restored after it (tests step the optimizer)."""
    saved = [p.detach().clone() for p in model.trainable_parameters()]
    yield saved
    with torch.no_grad():
        for p, s in zip(model.trainable_parameters(), saved, strict=True):
            p.copy_(s)


@pytest.fixture(scope="module")
def sampler():
    return build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 3], "window_mode": "fixed"})


@pytest.fixture(scope="module")
def batch(model, sampler):
    backend = build(
        "rollout",
        "diffusers",
        {"group_size": 2, "steps": 4, "eval_steps": 4, "height": 32, "width": 32, "cfg": 1.0, "batch_size": 8},
    )
    request = RolloutRequest(prompts=PROMPTS, group_ids=GROUPS, seeds=list(range(N)), step=1, mode="train")
    return backend.generate(model, sampler, request)


def _engine(model, sampler, loss_options: dict, optimizer: torch.optim.Optimizer, **optim) -> TrajectoryUpdate:
    return TrajectoryUpdate(model, sampler, build("loss", "flow_grpo", loss_options), optimizer, OptimConfig(**optim))


def _metric(stats: dict, key: str) -> float:
    return stats["sums"][key] / stats["counts"][key]


def _sgd(model, lr: float = 1.0) -> torch.optim.Optimizer:
    """Plain SGD: the weight change is -lr * gradient, so comparing changes compares gradients."""
    return torch.optim.SGD(list(model.trainable_parameters()), lr=lr)


def _counting(obj: object, method: str) -> list[int]:
    """Wrap ``obj.method`` so every call appends to the returned list (the call still happens)."""
    calls: list[int] = []
    original = getattr(obj, method)

    def counted(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    setattr(obj, method, counted)
    return calls


def test_reusing_the_rollouts_log_probs_skips_the_recompute(model, sampler, batch, weights) -> None:
    """recompute_old_log_probs = False takes the rollout's stored log-probs as the old policy's."""
    stale = attrs.evolve(batch, trajectory=attrs.evolve(batch.trajectory, log_probs=batch.trajectory.log_probs + 0.01))
    runs = {}
    for recompute in (True, False):
        optim = {"micro_batch": 4, "recompute_old_log_probs": recompute}
        engine = _engine(model, sampler, {"clip_ratio": 0.2}, _sgd(model, 0.0), **optim)
        calls = _counting(engine, "old_views")
        runs[recompute] = (engine.run(stale, ADVANTAGES, {}, generator=torch.Generator().manual_seed(0)), len(calls))
    (recomputed, recompute_calls), (reused, reuse_calls) = runs[True], runs[False]
    assert (recompute_calls, reuse_calls) == (1, 0)
    # recomputed with the same weights: ratio 1; reused: the stored (shifted) log-probs give exp(-0.01)
    assert _metric(recomputed, "ratio_mean") == pytest.approx(1.0, abs=1e-6)
    assert _metric(reused, "ratio_mean") == pytest.approx(np.exp(-0.01), abs=1e-6)
    assert _metric(reused, "ppo_kl") == pytest.approx(0.01, abs=1e-6)


def _window_means(model, sampler, batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Every sample's and window step's sampler mean μ (N, W, ...) and std s (N, W) under the current weights."""
    traj = batch.trajectory
    means, stds = [], []
    with torch.no_grad():
        for j in range(traj.log_probs.shape[1]):
            v = model.predict_velocity(traj.latents[:, j], traj.sigmas[:, j], batch.conditioning, traj.guidance_scale)
            out = sampler.step(
                traj.latents[:, j],
                v,
                traj.sigmas[:, j],
                traj.next_sigmas[:, j],
                sigma_max=traj.sigma_max,
                prev_sample=traj.next_latents[:, j],
            )
            means.append(out.mean)
            stds.append(torch.as_tensor(out.std_dev_t).reshape(N))
    return torch.stack(means, 1), torch.stack(stds, 1)


def _kl_to_base(model, sampler, batch) -> float:
    """The KL of docs/math.md#kl-to-the-reference, mean over samples and window steps of mean_dims (μ_θ - μ_ref)² /
    (2 s²), where the reference is the base model computed here by zeroing the LoRA weights (not through the engine's
    adapter switch)."""
    current, std = _window_means(model, sampler, batch)
    saved = [p.detach().clone() for p in model.trainable_parameters()]
    with torch.no_grad():
        for p in model.trainable_parameters():
            p.zero_()
        reference, _ = _window_means(model, sampler, batch)
        for p, s in zip(model.trainable_parameters(), saved, strict=True):
            p.copy_(s)
    sq = ((current - reference) ** 2).flatten(2).mean(-1)
    return float((sq / (2 * std**2)).mean())


def test_kl_uses_the_reference_view_with_the_lora_off(model, sampler, batch, weights) -> None:
    expected = _kl_to_base(model, sampler, batch)
    assert expected > 1e-3  # the perturbed LoRA moves the means
    zero = torch.zeros(N)  # no policy signal: the whole gradient is the KL's
    engine = _engine(model, sampler, {"kl_coef": 0.5}, _sgd(model, 0.5), micro_batch=3, grad_clip=0.0)
    assert "reference" in engine.loss.requirements.views
    stats = engine.run(batch, zero, {}, generator=torch.Generator().manual_seed(0))
    assert _metric(stats, "kl") == pytest.approx(expected, rel=1e-4)
    assert len(stats["grad_norms"]) == 1 and stats["grad_norms"][0] > 0
    # the step moved the policy towards the reference, and the adapters are back on after the update
    assert _kl_to_base(model, sampler, batch) < expected
    with torch.no_grad():
        for p, before in zip(model.trainable_parameters(), weights, strict=True):
            p.copy_(before)
    assert _kl_to_base(model, sampler, batch) == pytest.approx(expected, rel=1e-6)

    without_kl = _engine(model, sampler, {"kl_coef": 0.0}, _sgd(model, 0.5), micro_batch=3)
    assert "reference" not in without_kl.loss.requirements.views
    assert without_kl.run(batch, zero, {}, generator=torch.Generator().manual_seed(0))["no_signal"] == 1


def _step_gradients(model, sampler, batch, saved: list[torch.Tensor], **optim) -> torch.Tensor:
    """The flat accumulated gradient at each optimizer step of one engine run, (steps, P); weights reset after."""
    optimizer = _sgd(model, 1e-2)
    params = list(model.trainable_parameters())
    grads: list[torch.Tensor] = []
    original = optimizer.step

    def step(*args, **kwargs):
        grads.append(torch.cat([p.grad.flatten() for p in params]))
        return original(*args, **kwargs)

    optimizer.step = step
    engine = _engine(model, sampler, {"clip_ratio": 0.2, "kl_coef": 0.1}, optimizer, grad_clip=0.0, **optim)
    engine.run(batch, ADVANTAGES, {}, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        for p, s in zip(params, saved, strict=True):
            p.copy_(s)
    return torch.stack(grads)


@pytest.mark.parametrize("mini_batch", [0, 4])
def test_gradient_accumulation_does_not_depend_on_the_micro_batch(model, sampler, batch, weights, mini_batch) -> None:
    """Micro-batches of 1, 3 (uneven: 3 + 1 in a mini-batch of 4) and the whole mini-batch give the same gradient
    at every optimizer step: each micro-batch's loss is weighted by its share of the mini-batch (and of the window
    steps), so accumulation sums to the mini-batch mean. With mini_batch 4 the second step also sees the same
    weights after the first."""
    grads = [_step_gradients(model, sampler, batch, weights, micro_batch=m, mini_batch=mini_batch) for m in (1, 3, 8)]
    assert grads[0].shape[0] == (1 if mini_batch == 0 else 2)
    scale = float(grads[0].abs().max())
    assert scale > 0
    for other in grads[1:]:
        # the same terms in float32, but batched matmuls of other shapes round differently and the per-sample
        # gradients (advantages of both signs) cancel: measured within 4e-5 of the largest entry; a wrong
        # weighting is off by far more (the half-batch check below: > 5%)
        torch.testing.assert_close(other, grads[0], rtol=0, atol=1e-4 * scale)
    if mini_batch == 0:  # not trivially equal: the first half-batch's gradient is a different one
        half = _step_gradients(model, sampler, batch, weights, micro_batch=4, mini_batch=4)[0]
        assert float((half - grads[0][0]).abs().max()) > 0.05 * scale


def _update(worker: PolicyWorker) -> dict:
    """The driver's call after the rewards: this worker holds every sample of the step."""
    ids = list(range(N))
    return worker.update(ADVANTAGES.numpy(), {}, step=1, rewards=np.zeros(N), sample_ids=ids, global_group_ids=GROUPS)


def _worker_config(tiny_sd3: Path, tmp_path: Path, *sets: str):
    return load_config(
        EXAMPLE,
        [
            f"run.output_dir={tmp_path}",
            f"model.options.path={tiny_sd3}",
            "model.options.lora_rank=4",
            "rollout.options.height=32",
            "rollout.options.width=32",
            "rollout.options.group_size=2",
            "rollout.options.steps=4",
            "optim.micro_batch=2",
            *sets,
        ],
    )


@pytest.mark.parametrize(("mini_batch", "epochs", "steps"), [(2, 1, 4), (0, 1, 1), (3, 1, 3), (4, 2, 4)])
def test_worker_takes_one_optimizer_step_per_mini_batch(
    tiny_sd3: Path, tmp_path: Path, mini_batch: int, epochs: int, steps: int
) -> None:
    """N / mini_batch optimizer steps per epoch (rounded up; 0 = the whole batch), through the policy worker as
    the driver calls it: rollout_shard, then update with the driver's advantages."""
    config = _worker_config(tiny_sd3, tmp_path, f"optim.mini_batch={mini_batch}", f"optim.epochs={epochs}")
    worker = PolicyWorker(config)
    calls = _counting(worker.update_engine.stepper, "step")  # one clip-and-step per mini-batch
    request = RolloutRequest(prompts=PROMPTS, group_ids=GROUPS, seeds=list(range(N)), step=1, mode="train")
    out = worker.rollout_shard(request)
    assert out.images.shape == (N, 32, 32, 3)
    stats = _update(worker)
    assert len(calls) == steps
    assert len(stats["grad_norms"]) == steps and stats["skipped"] == 0


def test_worker_reuses_the_rollouts_log_probs_when_told(tiny_sd3: Path, tmp_path: Path, monkeypatch) -> None:
    """optim.recompute_old_log_probs = false reaches the worker's engine: no recompute pass, and with one
    whole-batch optimizer step the ratio is the rollout's own (1 to float precision)."""
    config = _worker_config(tiny_sd3, tmp_path, "optim.recompute_old_log_probs=false", "optim.mini_batch=0")
    worker = PolicyWorker(config)
    monkeypatch.setattr(worker.update_engine, "old_views", lambda *a, **k: pytest.fail("old log-probs recomputed"))
    request = RolloutRequest(prompts=PROMPTS, group_ids=GROUPS, seeds=list(range(N)), step=1, mode="train")
    worker.rollout_shard(request)
    stats = _update(worker)
    assert _metric(stats, "ratio_mean") == pytest.approx(1.0, abs=1e-5)
    assert len(stats["grad_norms"]) == 1
