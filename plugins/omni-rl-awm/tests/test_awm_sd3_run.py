"""The awm loss on a real (tiny, random) SD3 with peft LoRA adapters, and one short run through the real loop.

The adapter tests check docs/math.md#on-policy-ratio on the real model: with the "old" adapter a copy of the
trained one, the ratio is exactly 1 (evaluated through the old adapter, not short-cut), and the EMA adapter
follows ema ← d·ema + (1 − d)·θ weight by weight.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import torch
from omni_rl_awm.config import AWMLossConfig
from omni_rl_awm.loss import AWMLoss
from safetensors.torch import load_file

from omni_rl import build
from omni_rl.batch import ForwardLossInputs
from omni_rl.cli import main
from omni_rl.engine.forward_update import view_context

os.environ.setdefault("HF_HUB_OFFLINE", "1")

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_awm.toml"
SIZE = 32


@pytest.fixture(scope="module")
def tiny_sd3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    return Path(build_tiny_sd3_pipeline(tmp_path_factory.mktemp("sd3") / "tiny", seed=0))


@pytest.fixture(scope="module")
def model(tiny_sd3: Path) -> Any:
    return build("model", "sd3", {"path": str(tiny_sd3), "lora_rank": 4, "dtype": "float32"})


def _inputs(model: Any, advantages: list[float]) -> ForwardLossInputs:
    """Two samples with the engine's velocity views (current with grad; adapters / reference without)."""
    cond = model.encode_prompts(["a red circle", "two blue squares"], guidance_scale=1.0)

    def velocity(view: str, x_t: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
        if view == "current":
            return model.predict_velocity(x_t, sigma, cond, 1.0)
        with torch.no_grad(), view_context(model, view):
            return model.predict_velocity(x_t, sigma, cond, 1.0)

    shape = model.latent_shape(SIZE, SIZE)
    return ForwardLossInputs(
        x0=torch.randn((2, *shape), generator=torch.Generator().manual_seed(0)),
        advantages=torch.tensor(advantages),
        rewards=torch.zeros(2),
        group_ids=torch.zeros(2, dtype=torch.long),
        generators=[torch.Generator().manual_seed(10 + i) for i in range(2)],
        velocity=velocity,
        timestep_index=1,
        sigma_schedule=lambda n: model.sigma_schedule(n, SIZE, SIZE),
    )


def _adapter(model: Any, name: str) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.adapters.parameters_of(name)]


def test_ratio_is_exactly_one_through_the_old_adapter_and_ema_trails(model: Any) -> None:
    loss = AWMLoss(
        AWMLossConfig(timesteps=2, kl_coef=0.1, ema_coef=1.0, ema_decay=0.3, ema_decay_ramp=0.1, schedule_steps=6)
    )
    loss.setup(model)
    with torch.no_grad():  # a trained adapter away from its zero init, so every view differs from the reference
        for p in model.trainable_parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    loss.before_update(model, 1)
    loss.after_optimizer_step(model, 1)  # the "old" view is now evaluated rather than short-cut
    out = loss(_inputs(model, [1.0, -1.0]))
    assert out.metrics["ratio_mean"] == 1.0 and out.metrics["ratio_std"] == 0.0
    assert out.metrics["kl"] > 0 and out.metrics["ema_kl"] == 0.0  # ema = θ after the first refresh
    out.loss.backward()
    grads = [p.grad for p in model.trainable_parameters()]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    assert all(p.grad is None for p in model.adapters.parameters_of("old") + model.adapters.parameters_of("ema"))

    ema_before = _adapter(model, "ema")
    with torch.no_grad():
        for p in model.trainable_parameters():
            p.add_(0.01)
            p.grad = None
    theta = _adapter(model, "default")
    loss.before_update(model, 3)  # 2 completed steps: d = min(0.3, 0.2)
    for ema, before, now in zip(_adapter(model, "ema"), ema_before, theta, strict=True):
        torch.testing.assert_close(ema, 0.2 * before + 0.8 * now)
    for old, now in zip(_adapter(model, "old"), theta, strict=True):
        assert torch.equal(old, now)


def test_one_short_run_through_the_real_loop(tiny_sd3: Path, tmp_path: Path) -> None:
    """The example with a tiny random SD3 and the JPEG reward: 2 steps of 2 prompts x 4 images, 2 optimizer steps
    each (so the second compares against the old adapter), KL and EMA on; exit 0 and the loss's metrics logged."""
    out = tmp_path / "run"
    code = main(
        [
            "run",
            str(EXAMPLE),
            "--set",
            "run.steps=2",
            "--set",
            f"run.output_dir={out}",
            "--set",
            f"model.options.path={tiny_sd3}",
            "--set",
            'model.name="sd3"',  # the example's model is the Qwen-Image shapes one
            "--set",
            'reward.0.name="jpeg_compressibility"',
            "--set",
            f"rollout.options.height={SIZE}",
            "--set",
            f"rollout.options.width={SIZE}",
            "--set",
            "data.prompts_per_step=2",
            "--set",
            "rollout.options.group_size=4",
            "--set",
            "loss.options.ema_coef=1.0",
            "--set",
            "optim.mini_batch=4",
            "--set",
            "run.eval_before_training=false",
        ]
    )
    assert code == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    for row in rows:
        for key in ("policy_loss", "matching_loss", "weighted_loss", "ratio_mean", "clip_frac", "kl", "ema_kl"):
            assert f"actor/{key}" in row, key
            assert row[f"actor/{key}"] == row[f"actor/{key}"], key  # not NaN
        assert row["actor/optimizer_steps"] == 2.0
        assert abs(row["actor/ratio_mean"] - 1) < 1e-3
    assert (out / "checkpoints" / "step_2" / "pytorch_lora_weights.safetensors").exists()
    # what an exact resume needs besides the trained weights: the old / ema adapters and the anchors' counter
    own = out / "checkpoints" / "step_2" / "worker_0"
    assert json.loads((own / "update_state.json").read_text()) == {
        "engine": {"updates_done": 4},
        "loss": {"ema_step": 2},
    }
    adapters = {name.split(".")[-2] for name in load_file(str(own / "adapters.safetensors"))}
    assert adapters == {"old", "ema"}
