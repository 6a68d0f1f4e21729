"""The ELBO estimator of ``elbo_pg`` and ``v_grpo`` (docs/math.md#elbo-likelihood) on a model whose velocity is
known in closed form, and the draws' sharing and stratification.

Gaussian data x₀ ~ N(μ, s²·I) on the path x_t = (1 − t)·x₀ + t·ε has the optimal (marginal) velocity
v*(x_t, t) = E[ε − x₀ | x_t] = −μ + a(t)·(x_t − (1 − t)·μ), a(t) = (t − (1 − t)·s²) / ((1 − t)²·s² + t²).
For a fixed x₀ its flow-matching error at t is then, by hand, ε-averaged per element:
E_ε ℓ(t) = (1 + a(1 − t))²·mean((x₀ − μ)²) + (a·t − 1)², so the ELBO over uniform t is −∫₀¹ E_ε ℓ(t) dt.
"""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_awm.elbo import (
    draw_options,
    draw_pairs,
    elbo_from_errors,
    group_draw_scale,
    group_first_rows,
    matching_errors,
    noised,
)
from omni_rl_awm.elbo_config import ELBOPGLossConfig, VGRPOLossConfig

MU, S = 0.5, 0.7


def optimal_velocity(x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    t_b = t.reshape(-1, *([1] * (x_t.ndim - 1))).double()
    a = (t_b - (1 - t_b) * S**2) / ((1 - t_b) ** 2 * S**2 + t_b**2)
    return (-MU + a * (x_t.double() - (1 - t_b) * MU)).float()


def expected_error(x0: torch.Tensor, t: float) -> float:
    a = (t - (1 - t) * S**2) / ((1 - t) ** 2 * S**2 + t**2)
    return (1 + a * (1 - t)) ** 2 * float(((x0 - MU) ** 2).mean()) + (a * t - 1) ** 2


def _elbo(x0: torch.Tensor, draws: int, seed: int = 0, **options) -> torch.Tensor:
    config = ELBOPGLossConfig(draws=draws, **options)
    opts = draw_options(config)
    gens = [torch.Generator().manual_seed(seed + i) for i in range(x0.shape[0])]
    shape = tuple(x0.shape[1:])
    t, noise = draw_pairs(gens, shape, draws=draws, options=opts, stratified=config.stratified, device="cpu")
    x_t, t_flat, target, _ = noised(x0, t, noise)
    return elbo_from_errors(matching_errors(optimal_velocity(x_t, t_flat), target, x0.shape[0]), t, opts)


def test_the_error_of_one_draw_is_the_closed_form_value() -> None:
    """One (t, ε): ℓ = mean((1 + a(1 − t))(x₀ − μ) + (a·t − 1)·ε)², exactly (the velocity's algebra by hand)."""
    x0 = torch.tensor([[1.0, -0.5, 0.25]])
    eps = torch.tensor([[[0.3, 1.2, -0.7]]])
    t = torch.tensor([[0.4]])
    x_t, t_flat, target, rows = noised(x0, t, eps)
    ell = matching_errors(optimal_velocity(x_t, t_flat), target, 1)
    a = (0.4 - 0.6 * S**2) / (0.36 * S**2 + 0.16)
    by_hand = (((1 + a * 0.6) * (x0 - MU) + (a * 0.4 - 1) * eps[:, 0]) ** 2).mean()
    assert float(ell) == pytest.approx(float(by_hand), rel=1e-5)
    assert rows.tolist() == [0]


def test_the_monte_carlo_elbo_converges_to_the_integral_of_the_closed_form_error() -> None:
    x0 = torch.tensor([[1.0, -0.5, 0.25, 0.5] * 64])  # 256 elements: the ε-average is tight
    grid = [(i + 0.5) / 4000 for i in range(4000)]
    integral = -sum(expected_error(x0, t) for t in grid) / len(grid)
    estimate = float(_elbo(x0, draws=256))
    assert estimate == pytest.approx(integral, rel=0.03)


def test_the_elbo_prefers_likely_samples() -> None:
    """Under the optimal velocity the ELBO orders samples as the data density does: μ is likelier than μ + 2s."""
    near = torch.full((1, 64), MU)
    far = torch.full((1, 64), MU + 2 * S)
    assert float(_elbo(near, draws=64)) > float(_elbo(far, draws=64))


def test_stratified_draws_cover_every_stratum_and_independent_ones_need_not() -> None:
    opts = draw_options(ELBOPGLossConfig(draws=4))
    gens = [torch.Generator().manual_seed(i) for i in range(3)]
    t, noise = draw_pairs(gens, (2,), draws=4, options=opts, stratified=True, device="cpu")
    assert t.shape == (3, 4) and noise.shape == (3, 4, 2)
    for row in t:
        assert [math.floor(float(v) * 4) for v in row] == [0, 1, 2, 3]


def test_group_shared_draws_copy_the_first_members_draws() -> None:
    group_ids = torch.tensor([7, 7, 3, 7, 3])
    share = group_first_rows(group_ids)
    assert share.tolist() == [0, 0, 2, 0, 2]
    opts = draw_options(VGRPOLossConfig(draws=3))
    gens = [torch.Generator().manual_seed(10 + i) for i in range(5)]
    t, noise = draw_pairs(gens, (2,), draws=3, options=opts, stratified=True, device="cpu", share_rows=share)
    alone, alone_noise = draw_pairs(
        [torch.Generator().manual_seed(10)], (2,), draws=3, options=opts, stratified=True, device="cpu"
    )
    for row in (0, 1, 3):
        assert torch.equal(t[row], alone[0]) and torch.equal(noise[row], alone_noise[0])
    assert torch.equal(t[2], t[4]) and not torch.equal(t[0], t[2])


def test_the_adaptive_scale_is_the_inverse_group_mean_per_draw() -> None:
    ell = torch.tensor([[1.0, 4.0], [3.0, 8.0], [2.0, 2.0]])
    scale = group_draw_scale(ell, torch.tensor([0, 0, 1]), eps=0.0)
    assert torch.allclose(scale, torch.tensor([[0.5, 1 / 6], [0.5, 1 / 6], [0.5, 0.5]]))
