"""Deterministic solvers for the rollout steps outside the SDE window (MATH.md, "ode" and "DPM-Solver++(2M)").

Written by the MixGRPO work: ``build_solver("euler")`` and ``build_solver("dpm_solver_2m")``.
"""

from __future__ import annotations

from typing import Any


def build_solver(name: str) -> Any:
    raise NotImplementedError(name)
