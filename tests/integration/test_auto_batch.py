"""``"auto"`` batch sizes on the tiny SD3, in-process: the rollout's ``batch_size`` and the update's
``micro_batch`` probe with a fake out-of-memory error above a size (as CUDA raises it), resolve to the largest size
that fits, and then give exactly what the explicit size gives: the same images, latents and log-probs, the same
update. On the CPU "auto" takes the whole batch without probing. Config errors name the option's path."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from omni_rl import auto_batch, build
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.errors import ConfigError
from omni_rl.protocols import RolloutRequest

PROMPTS = ["a red circle"] * 4 + ["two blue squares"] * 4
GROUPS = [0] * 4 + [1] * 4
N = len(PROMPTS)
ROLLOUT = {"group_size": 4, "steps": 4, "eval_steps": 3, "height": 32, "width": 32, "cfg": 4.5}
ADVANTAGES = torch.tensor([1.2, -0.4, 0.7, -1.5, 0.3, -0.9, 1.8, -0.2])


@pytest.fixture(scope="module")
def model(tiny_sd3: Path):
    return build("model", "sd3", {"path": str(tiny_sd3), "lora_rank": 4})


@pytest.fixture(scope="module")
def sampler():
    return build("sampler", "flow_sde", {"window_size": 2, "window_range": [0, 3], "window_mode": "fixed"})


def _request(mode: str = "train") -> RolloutRequest:
    return RolloutRequest(prompts=PROMPTS, group_ids=GROUPS, seeds=list(range(N)), step=1, mode=mode)


class FakeOOM:
    """Wraps ``model.predict_velocity``: more than ``limit`` samples in one call raise CUDA's OOM."""

    def __init__(self, model, limit: int) -> None:
        self.model, self.limit, self.sizes = model, limit, []
        self.forward = model.predict_velocity

    def __call__(self, latents, sigmas, conditioning, guidance_scale):
        self.sizes.append(latents.shape[0])
        if latents.shape[0] > self.limit:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory (fake): batch {latents.shape[0]} > {self.limit}")
        return self.forward(latents, sigmas, conditioning, guidance_scale)


def _probing(monkeypatch: pytest.MonkeyPatch, model, limit: int) -> FakeOOM:
    """Make this CPU look like a GPU to "auto" (probe) with memory for ``limit`` samples per call."""
    monkeypatch.setattr(auto_batch, "probes_on", lambda device: True)
    fake = FakeOOM(model, limit)
    monkeypatch.setattr(model, "predict_velocity", fake)
    return fake


def test_rollout_auto_resolves_to_the_size_that_fits_and_changes_no_bit(
    model, sampler, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = _probing(monkeypatch, model, limit=3)
    auto = build("rollout", "diffusers", {**ROLLOUT, "batch_size": "auto"})
    got = auto.generate(model, sampler, _request())
    assert auto.last_batch_size == 3
    assert fake.sizes[:3] == [8, 4, 2]  # the whole batch, halved until it fits, then bisected up
    assert max(fake.sizes[fake.sizes.index(3) :]) == 3  # the rollout itself never went over
    calls = len(fake.sizes)
    again = auto.generate(model, sampler, _request())  # probed once: cached for this model, device and shape
    assert len(fake.sizes) - calls == 3 * 4  # 3 chunks (3 + 3 + 2) x 4 steps, no probe
    monkeypatch.undo()

    explicit = build("rollout", "diffusers", {**ROLLOUT, "batch_size": 3})
    want = explicit.generate(model, sampler, _request())
    assert explicit.last_batch_size is None  # nothing to report for an explicit size
    for batch in (got, again):
        assert torch.equal(batch.images, want.images)
        assert torch.equal(batch.final_latents, want.final_latents)
        assert torch.equal(batch.trajectory.log_probs, want.trajectory.log_probs)


def test_rollout_auto_on_cpu_is_the_whole_request(model, sampler) -> None:
    auto = build("rollout", "diffusers", {**ROLLOUT, "batch_size": "auto"})
    got = auto.generate(model, sampler, _request())
    assert auto.last_batch_size == N
    want = build("rollout", "diffusers", {**ROLLOUT, "batch_size": N}).generate(model, sampler, _request())
    assert torch.equal(got.images, want.images)
    assert torch.equal(got.trajectory.log_probs, want.trajectory.log_probs)


def _update(model, sampler, batch, micro_batch: int | str) -> tuple[dict, list[torch.Tensor], TrajectoryUpdate]:
    """One SGD update from the model's current LoRA; returns its stats and the weights after, then restores them."""
    params = list(model.trainable_parameters())
    saved = [p.detach().clone() for p in params]
    engine = TrajectoryUpdate(
        model,
        sampler,
        build("loss", "flow_grpo", {}),
        torch.optim.SGD(params, lr=1.0),
        OptimConfig(micro_batch=micro_batch, recompute_old_log_probs=True),
    )
    stats = engine.run(batch, ADVANTAGES, {}, generator=torch.Generator().manual_seed(0))
    after = [p.detach().clone() for p in params]
    with torch.no_grad():
        for p, s in zip(params, saved, strict=True):
            p.copy_(s)
    return stats, after, engine


def test_micro_batch_auto_resolves_to_the_size_that_fits_and_updates_alike(
    model, sampler, monkeypatch: pytest.MonkeyPatch
) -> None:
    batch = build("rollout", "diffusers", {**ROLLOUT, "batch_size": 8}).generate(model, sampler, _request())
    _probing(monkeypatch, model, limit=3)
    stats, after, engine = _update(model, sampler, batch, "auto")
    assert engine.optim.micro_batch == 3
    assert stats["sums"]["micro_batch"] / stats["counts"]["micro_batch"] == 3
    monkeypatch.undo()

    want_stats, want, _ = _update(model, sampler, batch, 3)
    assert "micro_batch" not in want_stats["sums"]
    assert stats["grad_norms"] == want_stats["grad_norms"]
    for a, b in zip(after, want, strict=True):
        assert torch.equal(a, b)


def test_micro_batch_auto_on_cpu_is_the_whole_local_batch(model, sampler) -> None:
    batch = build("rollout", "diffusers", {**ROLLOUT, "batch_size": 8}).generate(model, sampler, _request())
    _, _, engine = _update(model, sampler, batch, "auto")
    assert engine.optim.micro_batch == N


@pytest.mark.parametrize("value", [0, "max", 1.5])
def test_rollout_batch_size_errors_name_the_path(value: object) -> None:
    with pytest.raises(ConfigError, match=r"@ \$\.rollout\.options\.batch_size"):
        build("rollout", "diffusers", {**ROLLOUT, "batch_size": value})


def test_auto_is_refused_under_fsdp2(tiny_sd3: Path) -> None:
    from omni_rl import load_config

    example = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"
    sets = [
        f"model.options.path={tiny_sd3}",
        'cluster.strategy="fsdp2"',
        'optim.micro_batch="auto"',
        'rollout.options.batch_size="auto"',
    ]
    with pytest.raises(ConfigError) as error:
        load_config(example, sets)
    message = str(error.value)
    assert "$.optim.micro_batch" in message and "$.rollout.options.batch_size" in message
    assert "lockstep" in message
