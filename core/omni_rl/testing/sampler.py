"""Conformance suite for samplers (:class:`omni_rl.protocols.Sampler`)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from omni_rl.batch import SamplerStep
from omni_rl.protocols import Sampler
from omni_rl.specs import SamplerSpec
from omni_rl.testing._base import SpecConformance, torch_module


class SamplerConformance(SpecConformance):
    """Subclass with a ``spec`` fixture (see :class:`SpecConformance` for ``options`` and ``component``).

    Checks: one step returns a :class:`SamplerStep` shaped like ``x`` in float32; re-scoring the drawn sample
    (``prev_sample=``) reproduces its log-prob to 1e-6 and is differentiable in the velocity; the noise is
    used (stochastic samplers) or ignored (deterministic ones); the first step (sigma = 1, with
    ``sigma_max``) is finite; ``window`` is a deterministic range inside the schedule; the optional
    ``trained_positions`` gives, for every sample seed, the same number of distinct ascending positions inside the
    window, deterministically.
    Override ``latent_shape`` or ``sigmas`` (a (sigma, sigma_next, sigma_max) float triple) if needed.
    """

    spec_class: ClassVar[type[SamplerSpec]] = SamplerSpec
    latent_shape: ClassVar[tuple[int, ...]] = (3, 4, 8, 8)
    sigmas: ClassVar[tuple[float, float, float]] = (0.8, 0.6, 0.95)

    def _inputs(self, sigma: float | None = None) -> dict[str, Any]:
        torch = torch_module()
        generator = torch.Generator().manual_seed(0)
        batch = self.latent_shape[0]
        s, s_next, s_max = self.sigmas
        return {
            "x": torch.randn(self.latent_shape, generator=generator),
            "velocity": torch.randn(self.latent_shape, generator=generator),
            "sigma": torch.full((batch,), s if sigma is None else sigma),
            "sigma_next": torch.full((batch,), s_next),
            "sigma_max": torch.full((batch,), s_max),
            "noise": torch.randn(self.latent_shape, generator=generator),
        }

    def _step(self, sampler: Sampler, inputs: dict[str, Any], **changes: Any) -> SamplerStep:
        args = {**inputs, **changes}
        return sampler.step(
            args["x"],
            args["velocity"],
            args["sigma"],
            args["sigma_next"],
            sigma_max=args["sigma_max"],
            noise=args.get("noise"),
            prev_sample=args.get("prev_sample"),
        )

    def test_is_a_sampler(self, component: Any) -> None:
        assert isinstance(component, Sampler)
        assert isinstance(component.stochastic, bool)

    def test_step_is_shaped_like_x_in_float32(self, component: Sampler) -> None:
        torch = torch_module()
        inputs = self._inputs()
        step = self._step(component, inputs)
        assert isinstance(step, SamplerStep)
        for name in ("sample", "mean"):
            value = getattr(step, name)
            assert value.shape == inputs["x"].shape, name
            assert value.dtype == torch.float32, name
            assert torch.isfinite(value).all(), name
        if component.stochastic:
            assert step.log_prob is not None, "a stochastic sampler scores its steps"
            assert step.log_prob.shape == (self.latent_shape[0],)
            assert step.log_prob.dtype == torch.float32
            assert torch.isfinite(step.log_prob).all()
        else:
            assert step.log_prob is None, "a deterministic sampler has no density to score"

    def test_rescoring_the_sample_reproduces_its_log_prob(self, component: Sampler) -> None:
        if not component.stochastic:
            pytest.skip("deterministic sampler")
        torch = torch_module()
        inputs = self._inputs()
        drawn = self._step(component, inputs)
        rescored = self._step(component, inputs, noise=None, prev_sample=drawn.sample)
        torch.testing.assert_close(rescored.sample, drawn.sample, rtol=0, atol=1e-6)
        torch.testing.assert_close(rescored.log_prob, drawn.log_prob, rtol=0, atol=1e-6)
        torch.testing.assert_close(rescored.mean, drawn.mean, rtol=0, atol=1e-6)

    def test_log_prob_is_differentiable_in_the_velocity(self, component: Sampler) -> None:
        """The policy gradient flows from the re-scored log-prob back into the model's velocity."""
        if not component.stochastic:
            pytest.skip("deterministic sampler")
        torch = torch_module()
        inputs = self._inputs()
        drawn = self._step(component, inputs)
        velocity = inputs["velocity"].clone().requires_grad_(True)
        rescored = self._step(component, inputs, velocity=velocity, noise=None, prev_sample=drawn.sample)
        rescored.log_prob.sum().backward()
        assert velocity.grad is not None and torch.isfinite(velocity.grad).all()
        assert velocity.grad.abs().sum() > 0

    def test_noise_is_used(self, component: Sampler) -> None:
        torch = torch_module()
        inputs = self._inputs()
        first = self._step(component, inputs)
        again = self._step(component, inputs)
        other = self._step(component, inputs, noise=torch.randn(self.latent_shape))
        torch.testing.assert_close(again.sample, first.sample, rtol=0, atol=0)
        if component.stochastic:
            assert not torch.allclose(other.sample, first.sample), "a different noise gives the same sample"
        else:
            torch.testing.assert_close(other.sample, first.sample, rtol=0, atol=0)

    def test_first_step_at_sigma_one_is_finite(self, component: Sampler) -> None:
        torch = torch_module()
        step = self._step(component, self._inputs(sigma=1.0))
        assert torch.isfinite(step.sample).all()
        if step.log_prob is not None:
            assert torch.isfinite(step.log_prob).all()

    def test_window_is_a_deterministic_range_inside_the_schedule(self, component: Sampler) -> None:
        num_steps = 10
        for training_step in range(4):
            window = component.window(training_step, num_steps, 0)
            assert isinstance(window, range)
            assert all(0 <= i < num_steps for i in window)
            assert component.window(training_step, num_steps, 0) == window

    def test_trained_positions_are_a_deterministic_subset_of_the_window(self, component: Sampler) -> None:
        pick = getattr(component, "trained_positions", None)
        if pick is None:
            pytest.skip("no trained_positions member: every window step is trained")
        for window_len in (1, 4, 9):
            counts = set()
            for sample_seed in range(12):
                positions = list(pick(window_len, 3, 0, sample_seed))
                assert positions == sorted(set(positions)), positions
                assert all(isinstance(p, int) and 0 <= p < window_len for p in positions), positions
                assert list(pick(window_len, 3, 0, sample_seed)) == positions
                counts.add(len(positions))
            assert len(counts) == 1 and counts.pop() >= 1, "every sample must train the same number (>= 1) of steps"
