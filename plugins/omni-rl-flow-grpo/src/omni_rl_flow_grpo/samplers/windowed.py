"""What every windowed stochastic sampler (``flow_sde``, ``cps``, ``dance_sde``) shares besides its step: the SDE
window of a training step, the window steps each sample trains (``timestep_fraction``), and the deterministic
solver of the steps outside the window (``ode_solver``). The rollout backend and the worker call these through
the sampler protocol's optional members (docs/hooks.md), so a new stochastic sampler gets them by subclassing.
"""

from __future__ import annotations

from typing import Any

from omni_rl_flow_grpo.samplers.window import WindowConfig, sde_window, trained_positions


class WindowedSampler:
    """Base of the stochastic samplers: ``config`` is a :class:`WindowConfig` subclass; ``stochastic`` is set by
    the subclass (False at noise level 0, where nothing is drawn or trained)."""

    config: WindowConfig
    stochastic: bool

    def window(self, step: int, num_steps: int, seed: int) -> range:
        """The stochastic (trained) steps at training ``step``; empty when the noise level is 0."""
        if not self.stochastic:
            return range(0)
        return sde_window(self.config, step, num_steps, seed)

    def trained_positions(self, window_len: int, step: int, run_seed: int, sample_seed: int) -> list[int]:
        """Positions within the window that this sample trains (all, or a ``timestep_fraction`` subset)."""
        return trained_positions(self.config, window_len, step, run_seed, sample_seed)

    @property
    def tree_branching(self) -> tuple[int, ...]:
        """Children per window step of a tree rollout (optional sampler member; empty: no tree)."""
        return tuple(self.config.tree_branching) if self.stochastic else ()

    def deterministic_solver(self) -> Any:
        """A fresh solver for the steps outside the window (one per rollout chunk: it keeps the previous step's
        data prediction for the second-order update): ``step(x, v, sigma, sigma_next)`` and ``reset()``."""
        from omni_rl_flow_grpo.samplers.ode_solvers import build_solver

        return build_solver(self.config.ode_solver)
