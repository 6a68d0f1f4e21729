"""The online-DPO options (docs/math.md#dpo-draws, #dpo-reference, #dpo-safeguards) against hand computations on
the linear stand-in policy of test_dpo_loss: draws per pair averaged before the sigmoid, the t range, stratified
draws, the SFT term, the loser-gradient safeguard, and the moving references' lifecycle."""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from omni_rl_dpo.config import DPOLossConfig
from omni_rl_dpo.loss import DPOLoss
from omni_rl_dpo.reference import ReferencePolicy
from test_dpo_loss import B_REF, BETA, SEEDS, X0, A, LinearPolicy, make_inputs

REWARDS, GROUPS = [1.0, 0.0], [0, 0]  # one pair: chosen 0, rejected 1


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def _ndtri(u: float) -> float:
    return float(torch.special.ndtri(torch.tensor(u, dtype=torch.float64)))


def hand_draws(seed: int, count: int, *, lo=0.0, hi=1.0, stratum0: int | None = None, strata: int = 1):
    """The (t, ε) draws of one pair from its chosen sample's generator, in the documented order."""
    generator = torch.Generator().manual_seed(seed)
    out = []
    for d in range(count):
        if stratum0 is None:
            u = _sigmoid(torch.randn(1, generator=generator).item())
        else:
            r = torch.rand(1, generator=generator).item()
            u = _sigmoid(_ndtri((stratum0 + d + r) / strata))
        eps = torch.randn((1, 1, 2), generator=generator).flatten().tolist()
        out.append((lo + (hi - lo) * u, eps))
    return out


def hand_errors(draws, x0: list[float], a: float = A, b: float = B_REF):
    """(e_θ, e_ref, de_θ/da, g = v_θ - u of every draw) of one sample, averaged over the draws."""
    e_theta = e_ref = de = 0.0
    grad: list[float] = []
    for t, eps in draws:
        x_t = [(1 - t) * x + t * e for x, e in zip(x0, eps, strict=True)]
        u = [e - x for x, e in zip(x0, eps, strict=True)]
        e_theta += sum((a * xt - ut) ** 2 for xt, ut in zip(x_t, u, strict=True)) / 2 / len(draws)
        e_ref += sum((b * xt - ut) ** 2 for xt, ut in zip(x_t, u, strict=True)) / 2 / len(draws)
        de += sum(2 * (a * xt - ut) * xt for xt, ut in zip(x_t, u, strict=True)) / 2 / len(draws)
        grad += [a * xt - ut for xt, ut in zip(x_t, u, strict=True)]
    return e_theta, e_ref, de, grad


def run(policy: LinearPolicy, index: int = 0, **options: Any):
    loss = DPOLoss(DPOLossConfig(beta=BETA, **options))
    inputs = make_inputs(loss, policy, REWARDS, GROUPS, [0, 1])
    inputs.timestep_index = index
    out = loss(inputs)
    out.loss.backward()
    return out


def expected(draws, *, sft: float = 0.0, mu: float = 0.0, a: float = A) -> dict[str, float]:
    etw, erw, dw, gw = hand_errors(draws, X0[0], a=a)
    etl, erl, dl, gl = hand_errors(draws, X0[1], a=a)
    inside = -(BETA / 2) * ((etw - etl) - (erw - erl))
    dot, sq = sum(p * q for p, q in zip(gw, gl, strict=True)), sum(p * p for p in gw)
    lam = min(1.0, mu * sq / dot) if (mu > 0 and dot > 0) else 1.0
    return {
        "loss": math.log1p(math.exp(-inside)) + sft * etw,
        "grad_a": _sigmoid(-inside) * (BETA / 2) * (dw - lam * dl) + sft * dw,
        "inside": inside,
        "chosen_error_delta": etw - erw,
        "rejected_error_delta": etl - erl,
        "lam": lam,
    }


def check(out, policy: LinearPolicy, want: dict[str, float]) -> None:
    assert out.loss.item() == pytest.approx(want["loss"], rel=1e-5)
    assert policy.a.grad.item() == pytest.approx(want["grad_a"], rel=1e-4)
    assert out.metrics["reward_margin"] == pytest.approx(want["inside"], rel=1e-5)
    assert out.metrics["chosen_error_delta"] == pytest.approx(want["chosen_error_delta"], rel=1e-4, abs=1e-6)
    assert out.metrics["rejected_error_delta"] == pytest.approx(want["rejected_error_delta"], rel=1e-4, abs=1e-6)


def test_draws_per_pair_average_the_errors_before_the_sigmoid() -> None:
    policy = LinearPolicy()
    out = run(policy, draws_per_pair=3)
    check(out, policy, expected(hand_draws(SEEDS[0], 3)))
    # one forward of 2 samples x 3 draws, the pair sharing each draw
    _, _x_t, sigma, samples = policy.calls[0]
    assert samples.tolist() == [0, 1, 0, 1, 0, 1] and sigma[0] == sigma[1] and sigma[0] != sigma[2]


def test_timestep_range_maps_the_draws() -> None:
    policy = LinearPolicy()
    out = run(policy, timestep_range=[0.8, 1.0])
    draws = hand_draws(SEEDS[0], 1, lo=0.8, hi=1.0)
    check(out, policy, expected(draws))
    assert policy.calls[0][2][0].item() == pytest.approx(draws[0][0], rel=1e-6)
    assert 0.8 <= policy.calls[0][2][0].item() <= 1.0


@pytest.mark.parametrize("index", [0, 1])
def test_stratified_draws_take_one_stratum_each(index: int) -> None:
    """timesteps = 2, draws_per_pair = 2: call k's draw d is in stratum 2k + d of 4."""
    policy = LinearPolicy()
    out = run(policy, timesteps=2, draws_per_pair=2, stratified=True, index=index)
    draws = hand_draws(SEEDS[0], 2, stratum0=2 * index, strata=4)
    check(out, policy, expected(draws))
    edges = [_sigmoid(_ndtri(q)) if 0 < q < 1 else q for q in (0.0, 0.25, 0.5, 0.75, 1.0)]
    for d, (t, _) in enumerate(draws):
        assert edges[2 * index + d] <= t <= edges[2 * index + d + 1]


def test_sft_weight_adds_the_chosen_flow_matching_error() -> None:
    policy = LinearPolicy()
    out = run(policy, sft_weight=0.5)
    want = expected(hand_draws(SEEDS[0], 1), sft=0.5)
    check(out, policy, want)
    assert out.metrics["sft_mse"] == pytest.approx(hand_errors(hand_draws(SEEDS[0], 1), X0[0])[0], rel=1e-5)


@pytest.mark.parametrize(("mu", "a"), [(1.0, A), (0.05, -1.0)])  # a = A: <g_w, g_l> < 0; a = -1: > 0
def test_loser_safeguard_scales_only_the_rejected_gradient(mu: float, a: float) -> None:
    policy = LinearPolicy(a=a)
    out = run(policy, loser_safeguard=mu)
    want = expected(hand_draws(SEEDS[0], 1), mu=mu, a=a)
    check(out, policy, want)  # the loss value is unchanged, the gradient uses λ·∇e_l
    assert out.metrics["loser_scale"] == pytest.approx(want["lam"], rel=1e-5)
    if mu == 0.05:
        assert want["lam"] < 1.0  # the hand case is not degenerate


def test_defaults_keep_the_single_draw_of_the_reference() -> None:
    """draws_per_pair 1, the full range, not stratified: the draw is the original pair_draw's, bit for bit."""
    from omni_rl_dpo.draws import draws, pair_draw

    t0, e0 = pair_draw(torch.Generator().manual_seed(3), (1, 2), mean=0.0, std=1.0)
    t1, e1 = draws(
        torch.Generator().manual_seed(3),
        (1, 2),
        count=1,
        timestep_index=0,
        timesteps=1,
        mean=0.0,
        std=1.0,
        time_range=(0.0, 1.0),
        stratified=False,
    )
    assert torch.equal(t0, t1) and torch.equal(e0, e1[0])


class FakeAdapters:
    """Named adapters as floats: add copies, blend mixes, use switches what the policy reads."""

    def __init__(self) -> None:
        self.weights = {"default": 0.0}
        self.log: list[tuple[str, ...]] = []

    def add_adapter(self, name: str, *, copy_from: str | None = "default") -> None:
        self.weights[name] = self.weights[copy_from or "default"]
        self.log.append(("add", name))

    @contextmanager
    def use_adapter(self, name: str):
        yield

    def blend_adapter(self, target: str, source: str = "default", *, decay: float) -> None:
        self.weights[target] = decay * self.weights[target] + (1 - decay) * self.weights[source]
        self.log.append(("blend", target, str(decay)))


def test_synced_reference_is_an_adapter_the_rollout_samples_from_synced_every_k_steps() -> None:
    loss = DPOLoss(DPOLossConfig(reference="synced", reference_sync_every=2))
    assert loss.requirements.views == frozenset({"current", "old"}) and loss.requirements.rollout_view == "old"
    model = FakeAdapters()
    loss.setup(model)
    for step in (1, 2, 3, 4):
        loss.before_update(model, step)
        model.weights["default"] = float(step)  # the update moved the trained weights
        loss.after_update(model, step)
        assert model.weights["old"] == (0.0 if step < 2 else 2.0 if step < 4 else 4.0)


def test_ema_reference_blends_after_every_step() -> None:
    loss = DPOLoss(DPOLossConfig(reference="ema", reference_ema_decay=0.25))
    assert loss.requirements.views == frozenset({"current", "ema"}) and loss.requirements.rollout_view == "current"
    model = FakeAdapters()
    loss.setup(model)
    ref = 0.0
    for step in (1, 2, 3):
        loss.before_update(model, step)
        model.weights["default"] = float(step)
        loss.after_update(model, step)
        ref = 0.25 * ref + 0.75 * step
        assert model.weights["ema"] == pytest.approx(ref)


def test_frozen_reference_keeps_the_lora_off_view() -> None:
    loss = DPOLoss(DPOLossConfig())
    assert loss.requirements.views == frozenset({"current", "reference"})
    assert loss.requirements.rollout_view == "current"
    kept: list[bool] = []

    class Full:
        def keep_reference_copy(self) -> None:
            kept.append(True)

    loss.setup(Full())
    assert kept == [True]


def test_a_moving_reference_without_named_adapters_is_refused() -> None:
    from omni_rl.errors import RuntimeFailure

    with pytest.raises(RuntimeFailure, match=r"\$.loss.options.reference"):
        ReferencePolicy("ema").setup(object())


def test_the_reference_view_is_what_the_loss_evaluates() -> None:
    policy = LinearPolicy()
    run(policy, reference="ema")
    assert [call[0] for call in policy.calls] == ["current", "ema"]


def test_bad_timestep_range_is_refused() -> None:
    with pytest.raises(ValueError, match="timestep_range"):
        DPOLossConfig(timestep_range=[0.9, 0.5])
