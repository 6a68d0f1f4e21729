"""The deterministic solvers of the steps outside the SDE window (docs/math.md#dpm-solver2m): a two-step example
worked by hand, the limits at σ = 1 and σ' = 0, first order = Euler, per-sample sigmas, reset, and a cross-check
against diffusers' DPMSolverMultistepScheduler configured for flow matching."""

from __future__ import annotations

import math

import pytest
import torch
from omni_rl_flow_grpo.samplers.ode_solvers import DPMSolver2M, EulerSolver, build_solver


def _scalar(value: float) -> torch.Tensor:
    """One sample with one latent element, so the solver's arithmetic is the hand computation's."""
    return torch.tensor([[value]], dtype=torch.float32)


def _sig(value: float) -> torch.Tensor:
    return torch.tensor([value], dtype=torch.float32)


def test_two_steps_by_hand() -> None:
    """σ: 0.8 → 0.5 → 0.25 with velocities 0.5 then -0.25 (α = 1 - σ, λ = log(α/σ), D = x - σ·v)."""
    solver = build_solver("dpm_solver_2m")
    # step 1 (first order): D1 = 1 - 0.8·0.5 = 0.6; e^-h1 = (0.2·0.5)/(0.8·0.5) = 0.25
    d1 = 1.0 - 0.8 * 0.5
    x1 = (0.5 / 0.8) * 1.0 - 0.5 * (0.25 - 1) * d1  # = 0.625 + 0.225 = 0.85
    assert x1 == pytest.approx(0.85)
    got1 = solver.step(_scalar(1.0), _scalar(0.5), _sig(0.8), _sig(0.5))
    assert got1.item() == pytest.approx(x1, abs=1e-6)
    # step 2 (second order): D2 = 0.85 + 0.5·0.25 = 0.975; h1 = log(1) - log(0.25) = log 4; h2 = log 3 - log 1;
    # r = h1/h2; D̃ = (1 + 1/(2r))·D2 - 1/(2r)·D1; e^-h2 = 1/3
    d2 = x1 - 0.5 * -0.25
    h1 = math.log(0.5 / 0.5) - math.log(0.2 / 0.8)
    h2 = math.log(0.75 / 0.25) - math.log(0.5 / 0.5)
    r = h1 / h2
    d_tilde = (1 + 1 / (2 * r)) * d2 - (1 / (2 * r)) * d1
    x2 = (0.25 / 0.5) * x1 - 0.75 * (math.exp(-h2) - 1) * d_tilde  # = 0.425 + 0.5·D̃ ≈ 0.986795
    assert x2 == pytest.approx(0.986795, abs=1e-6)
    got2 = solver.step(got1, _scalar(-0.25), _sig(0.5), _sig(0.25))
    assert got2.item() == pytest.approx(x2, abs=1e-6)
    # the same second step at first order (after reset) is Euler: 0.85 - 0.25·(0.25 - 0.5) = 0.9125
    solver.reset()
    assert solver.step(got1, _scalar(-0.25), _sig(0.5), _sig(0.25)).item() == pytest.approx(0.9125, abs=1e-6)


def test_sigma_one_limit_and_last_step_returns_the_data_prediction() -> None:
    """σ = 1 (λ = -∞): x' = σ'·x + (1 - σ')·D; the step after it is first order (h_prev = ∞); σ' = 0: x' = D."""
    solver = DPMSolver2M()
    x0, v0 = 2.0, 1.5
    d0 = x0 - 1.0 * v0  # 0.5
    x1 = solver.step(_scalar(x0), _scalar(v0), _sig(1.0), _sig(0.6))
    assert x1.item() == pytest.approx(0.6 * x0 + 0.4 * d0, abs=1e-6)  # 1.4
    x2 = solver.step(x1, _scalar(0.9), _sig(0.6), _sig(0.3))
    assert x2.item() == pytest.approx(1.4 + 0.9 * (0.3 - 0.6), abs=1e-6)  # first order: the Euler step
    x3 = solver.step(x2, _scalar(-0.7), _sig(0.3), _sig(0.0))
    assert x3.item() == pytest.approx(x2.item() - 0.3 * -0.7, abs=1e-6)  # D of the last step
    assert torch.isfinite(x3).all()


def test_first_order_equals_the_euler_step() -> None:
    """First-order DPM-Solver++ in the flow parametrisation is x + (σ' - σ)·v, up to float rounding."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, 5, 5, generator=generator)
    v = torch.randn(3, 4, 5, 5, generator=generator)
    sigma, sigma_next = torch.tensor([1.0, 0.7, 0.31]), torch.tensor([0.9, 0.2, 0.0])
    euler = EulerSolver().step(x, v, sigma, sigma_next)
    torch.testing.assert_close(DPMSolver2M().step(x, v, sigma, sigma_next), euler, atol=2e-6, rtol=0)


def test_euler_solver_is_the_backends_inline_step_bit_for_bit() -> None:
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, 3, 3, generator=generator)
    v = torch.randn(2, 4, 3, 3, generator=generator)
    sigmas = torch.tensor([1.0, 0.75, 0.0])
    sigma, sigma_next = sigmas[1].expand(2), sigmas[2].expand(2)
    inline = x + v * (sigma_next - sigma).view(-1, *([1] * (x.ndim - 1)))
    solver = build_solver("euler")
    assert torch.equal(solver.step(x, v, sigma, sigma_next), inline)
    solver.reset()  # stateless: a no-op
    assert torch.equal(solver.step(x, v, sigma, sigma_next), inline)


def test_per_sample_sigmas_match_solving_each_sample_alone() -> None:
    generator = torch.Generator().manual_seed(2)
    schedules = [[1.0, 0.8, 0.5, 0.2, 0.0], [1.0, 0.9, 0.6, 0.45, 0.0]]
    x = torch.randn(2, 2, 3, 3, generator=generator)
    velocities = [torch.randn(2, 2, 3, 3, generator=generator) for _ in range(4)]
    together, alone = DPMSolver2M(), [DPMSolver2M(), DPMSolver2M()]
    y, ys = x.clone(), [x[k : k + 1].clone() for k in range(2)]
    for i in range(4):
        sigma = torch.tensor([s[i] for s in schedules])
        sigma_next = torch.tensor([s[i + 1] for s in schedules])
        y = together.step(y, velocities[i], sigma, sigma_next)
        for k in range(2):
            ys[k] = alone[k].step(ys[k], velocities[i][k : k + 1], sigma[k : k + 1], sigma_next[k : k + 1])
    torch.testing.assert_close(y, torch.cat(ys), atol=1e-6, rtol=0)


def test_float32_output_from_bfloat16_inputs() -> None:
    x = torch.ones(1, 2, 2, 2, dtype=torch.bfloat16)
    out = DPMSolver2M().step(x, x, torch.tensor([0.5]), torch.tensor([0.25]))
    assert out.dtype == torch.float32


def test_a_chunk_of_another_shape_is_refused_and_unknown_names_are_named() -> None:
    solver = DPMSolver2M()
    solver.step(torch.zeros(2, 1, 2, 2), torch.zeros(2, 1, 2, 2), torch.tensor([0.8, 0.8]), torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="one solver per batch chunk"):
        solver.step(torch.zeros(3, 1, 2, 2), torch.zeros(3, 1, 2, 2), torch.full((3,), 0.5), torch.full((3,), 0.2))
    with pytest.raises(ValueError, match=r"unknown ode_solver 'heun'.*'dpm_solver_2m', 'euler'"):
        build_solver("heun")


# -- against a known flow: Gaussian data N(mu, s^2) -------------------------------------------------------------
MU, S = 0.3, 0.5


def _data_prediction(x: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """E[x0 | x_σ] for x0 ~ N(MU, S²): the exact flow's D, so v = (x - D)/σ is the exact velocity."""
    alpha = 1 - sigma
    return MU + alpha * S**2 / (alpha**2 * S**2 + sigma**2) * (x - alpha * MU)


def _solve(name: str, steps: int, noise: torch.Tensor, sigmas: torch.Tensor | None = None) -> torch.Tensor:
    if sigmas is None:  # SD3's schedule: shift 3
        t = torch.linspace(1, 0, steps + 1, dtype=torch.float64)
        sigmas = (3 * t / (1 + 2 * t)).to(torch.float32)
    solver, x = build_solver(name), noise.clone()
    for i in range(steps):
        sigma = sigmas[i].expand(x.shape[0])
        velocity = (x - _data_prediction(x, sigma.view(-1, 1))) / sigma.view(-1, 1)
        x = solver.step(x, velocity, sigma, sigmas[i + 1].expand(x.shape[0]))
    return x


def test_dpm_solver_reaches_eulers_accuracy_with_half_the_steps() -> None:
    """The exact endpoint of the flow from noise ε is MU + S·ε (the flow of Gaussian data is affine in ε)."""
    noise = torch.linspace(-2, 2, 9).view(-1, 1)
    exact = MU + S * noise

    def error(name: str, steps: int) -> float:
        return float((_solve(name, steps, noise) - exact).abs().max())

    for steps in (16, 32):
        assert error("dpm_solver_2m", steps) < error("euler", 2 * steps)
    assert error("dpm_solver_2m", 32) < 0.1 * error("euler", 32)


def test_matches_diffusers_dpm_solver_multistep_for_flow_matching() -> None:
    """diffusers' scheduler with flow sigmas, ``flow_prediction``, DPM-Solver++ order 2 (midpoint), final sigma 0
    and no lower-order rule besides the last step: the same trajectory, from its own schedule and from one that
    starts at σ = 1 exactly (where its λ is -∞ and its second step is first order, as here)."""
    diffusers = pytest.importorskip("diffusers")
    scheduler = diffusers.DPMSolverMultistepScheduler(
        use_flow_sigmas=True,
        prediction_type="flow_prediction",
        flow_shift=3.0,
        final_sigmas_type="zero",
        lower_order_final=False,
        solver_order=2,
        algorithm_type="dpmsolver++",
        solver_type="midpoint",
    )
    noise = torch.linspace(-2, 2, 9).view(9, 1, 1, 1)
    for start_at_one in (False, True):
        scheduler.set_timesteps(8)
        if start_at_one:
            sigmas = scheduler.sigmas.clone()
            sigmas[0] = 1.0
            scheduler.sigmas = sigmas
        sigmas = scheduler.sigmas.clone().to(torch.float32)
        x = noise.clone()
        for i, timestep in enumerate(scheduler.timesteps):
            velocity = (x - _data_prediction(x, sigmas[i])) / sigmas[i]
            x = scheduler.step(velocity, timestep, x).prev_sample
        ours = _solve("dpm_solver_2m", 8, noise.view(9, 1), sigmas)
        torch.testing.assert_close(ours, x.view(9, 1), atol=1e-6, rtol=0)
