"""The SDE window (Flow-GRPO-Fast, MixGRPO; docs/math.md#sde-window): which schedule steps are stochastic and trained.

Only steps ``j`` in ``[start, start + window_size)`` draw noise and record log-probs; the others are ODE
steps. This module holds the window options shared by every stochastic sampler and the draw of the window
for one training step. It is stdlib-only so that ``hooks.py`` can import the option classes in
milliseconds.

Semantics follow the reference implementation (flow_grpo's ``*_pipeline_with_logprob_fast``), so its
configs port unchanged (``sde_window_size = 3``, ``sde_window_range = (0, num_steps // 2)`` becomes
``window_size = 3``, ``window_range = [0, 5]``):

- ``window_range = (lo, hi)`` bounds the *whole window*: ``[start, start + W) ⊆ [lo, hi)``, so the start is
  drawn uniformly from ``lo … hi - W`` (both inclusive). ``hi = 0`` means "the end of the schedule".
- ``window_size = 0`` means every step *but the last* is stochastic and trained, as in the reference
  (its fast pipeline uses ``(0, num_steps - 1)``; its full trainer trains ``timestep_fraction = 0.99`` of
  the steps). The last step lands on σ' = 0, where the transition is (nearly) deterministic: for ``cps``
  s = σ'·sin(ηπ/2) = 0, so log p ≡ 0 and the KL term divides by zero.
- An explicit window may include the last step (the reference allows it too). ``flow_sde`` is fine there
  (s·sqrt(-dt) = a·σ/sqrt(1 - σ) > 0 as long as σ < 1, just a sharp Gaussian); ``cps`` degenerates as above,
  so with ``cps`` and a KL term keep ``hi <= num_steps - 1``.
"""

from __future__ import annotations

import hashlib
import math
import random
from typing import Any, Literal

import attrs

from omni_rl.validators import fraction, int_at_least, non_negative_int

WindowMode = Literal["random", "fixed", "progressive"]
WINDOW_MODES: tuple[str, ...] = ("random", "fixed", "progressive")
ODESolver = Literal["euler", "dpm_solver_2m"]
ODE_SOLVERS: tuple[str, ...] = ("euler", "dpm_solver_2m")


def _window_range(instance: Any, attribute: attrs.Attribute, value: tuple[int, ...]) -> None:
    if len(value) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in value):
        raise ValueError(f"window_range must be two integers [lo, hi], got {list(value)!r}")
    lo, hi = value
    if lo < 0 or hi < 0:
        raise ValueError(f"window_range must be >= 0 (hi = 0 means the end of the schedule), got {[lo, hi]}")
    if hi != 0 and hi - lo < instance.window_size:
        raise ValueError(
            f"window_range {[lo, hi]} spans {hi - lo} steps, fewer than window_size {instance.window_size}: "
            f"the window [start, start + window_size) must fit inside [lo, hi); widen the range "
            f"(hi = 0 means the end of the schedule) or shrink window_size"
        )


def _tree_branching(instance: Any, attribute: attrs.Attribute, value: tuple[int, ...]) -> None:
    """A tree rollout branches once per window step, into at least 2 children (docs/math.md#tree-rollouts)."""
    if not value:
        return
    if any(isinstance(b, bool) or not isinstance(b, int) or b < 2 for b in value):
        raise ValueError(f"tree_branching must be integers >= 2 (children per branch step), got {list(value)!r}")
    if instance.window_size != len(value):
        raise ValueError(
            f"tree_branching {list(value)!r} branches at {len(value)} steps, but window_size is "
            f"{instance.window_size}: each SDE window step is one branch point, so set window_size = {len(value)}"
        )
    if instance.timestep_fraction < 1.0:
        raise ValueError("tree_branching trains every branch step: leave timestep_fraction at 1")


def _progressive_needs_a_size(instance: Any, attribute: attrs.Attribute, mode: str) -> None:
    """A progressive window must have a size: window_size = 0 means "every step but the last", which cannot slide."""
    if mode == "progressive" and instance.window_size == 0:
        raise ValueError(
            'window_mode = "progressive" needs window_size >= 1 (MixGRPO slides a window of W steps, 4 in its '
            "reference); window_size = 0 means every step but the last, which has nowhere to slide"
        )


@attrs.frozen(kw_only=True)
class WindowConfig:
    """Window options shared by every stochastic sampler's config (see the module docstring)."""

    #: number of consecutive stochastic (trained) steps; 0 = every step but the last
    window_size: int = attrs.field(default=0, validator=non_negative_int)
    #: the window lies within steps [lo, hi) (hi = 0: the end of the schedule); start ~ U{lo, …, hi - W}
    window_range: tuple[int, int] = attrs.field(default=(0, 0), converter=tuple, validator=_window_range)
    #: "random": start drawn per training step (seeded by run seed and step, so all workers agree);
    #: "fixed": start = window_range[0] every step; "progressive" (MixGRPO): the window slides from lo towards
    #: the end of the range by ``window_stride`` steps every ``iters_per_group`` training steps
    window_mode: WindowMode = attrs.field(
        default="random", validator=[attrs.validators.in_(WINDOW_MODES), _progressive_needs_a_size]
    )
    #: progressive mode: training steps the window stays at one place (MixGRPO's ``iters_per_group``, 25)
    iters_per_group: int = attrs.field(default=25, validator=int_at_least(1))
    #: progressive mode: how many schedule steps the window moves each time (S); 0 = window_size (no overlap, as
    #: MixGRPO without ``prog_overlap``; its ``prog_overlap_step`` is a smaller stride)
    window_stride: int = attrs.field(default=0, validator=non_negative_int)
    #: DanceGRPO's timestep_fraction: each sample trains only ceil(f * |window|) of the window's steps, a random
    #: subset drawn per (run seed, training step, sample seed); the whole window is still sampled stochastically
    timestep_fraction: float = attrs.field(default=1.0, converter=float, validator=fraction)
    #: the deterministic solver of the steps outside the window: "euler" (the diffusers scheduler's step) or
    #: "dpm_solver_2m" (MixGRPO-Flash: DPM-Solver++(2M) in the flow parametrisation, second order)
    ode_solver: ODESolver = attrs.field(default="euler", validator=attrs.validators.in_(ODE_SOLVERS))
    #: tree rollouts (TreeGRPO / BranchGRPO; docs/math.md#tree-rollouts): a group is a tree whose root is one
    #: shared x_T, ODE until the window, and window step d branches every node into ``tree_branching[d]`` children
    #: (one noise draw each); group_size must be the product. Empty: independent samples (the default)
    tree_branching: tuple[int, ...] = attrs.field(default=(), converter=tuple, validator=_tree_branching)


def _step_rng(seed: int, step: int) -> random.Random:
    """A generator that depends only on (seed, step): identical on every worker, process and platform.

    Python's ``hash`` is salted per process, so the pair is hashed with SHA-256 instead.
    """
    digest = hashlib.sha256(f"omni-rl-sde-window:{seed}:{step}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def sde_window(config: WindowConfig, step: int, num_steps: int, seed: int) -> range:
    """The stochastic steps ``range(start, start + W)`` of a ``num_steps`` schedule at training ``step``.

    The configured range is clipped to the schedule: ``hi`` to ``num_steps``, ``W`` to ``num_steps``, and a
    range that no longer fits is moved left (``start <= num_steps - W``), so the result is always a valid,
    in-bounds window of ``min(W, num_steps)`` steps.
    """
    if num_steps <= 0:
        return range(0)
    if config.window_size == 0:
        return range(0, num_steps - 1)
    size = min(config.window_size, num_steps)
    lo, hi = config.window_range
    hi = num_steps if hi == 0 else min(hi, num_steps)
    last_start = max(hi - size, 0)
    first_start = min(lo, last_start)
    if config.window_mode == "fixed":
        return range(first_start, first_start + size)
    if config.window_mode == "progressive":
        start = progressive_start(config, step, first_start, last_start, size)
        return range(start, start + size)
    start = _step_rng(seed, step).randint(first_start, last_start)
    return range(start, start + size)


def progressive_start(config: WindowConfig, step: int, first_start: int, last_start: int, size: int) -> int:
    """MixGRPO's progressive window: start = min(r0 + floor((t - 1) / iters_per_group) * S, r1 - W).

    ``step`` is the 1-based training step t, so the start is a function of t alone and a resumed run slides
    exactly as the uninterrupted one (steps before the first, such as validation's -1, count as t = 1). Once at
    the end of the range the window stays there (MixGRPO restarts from r0 only with its ``roll_back`` option).
    """
    stride = config.window_stride or size
    moves = max(step - 1, 0) // config.iters_per_group
    return min(first_start + moves * stride, last_start)


def trained_positions(config: WindowConfig, window_len: int, step: int, run_seed: int, sample_seed: int) -> list[int]:
    """Positions (0 … window_len - 1, ascending) of the window steps one sample trains: all of them, or with
    ``timestep_fraction`` f < 1 a random subset of ceil(f * window_len) (DanceGRPO), drawn from a generator keyed
    by (run seed, training step, sample seed) so every worker and every resume draws the same subset.

    The count is ceil(f * W) (docs/math.md#timestep-fraction), taken 1e-9 below the float product so that a product
    rounded up past an integer still counts as that integer (0.28 * 25 is 7.000000000000001 in floats: 7 steps, not
    8). DanceGRPO's reference truncates instead (``int(W * f)``); the two agree whenever f * W is a whole number (its
    scripts: 0.6 of 15 steps = 9), and the ceiling keeps at least one step where truncation would train none."""
    if config.timestep_fraction >= 1.0 or window_len == 0:
        return list(range(window_len))
    keep = max(1, min(window_len, math.ceil(config.timestep_fraction * window_len - 1e-9)))
    digest = hashlib.sha256(f"omni-rl-timestep-fraction:{run_seed}:{step}:{sample_seed}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return sorted(rng.sample(range(window_len), keep))


def window_can_reach_last_step(config: WindowConfig, num_steps: int) -> bool:
    """Whether the window of some training step includes the schedule's last step (``num_steps - 1``).

    Mirrors :func:`sde_window`: ``window_size = 0`` never does; a random window does when its latest start
    (``hi - W``, ``hi`` clipped to the schedule) ends there; a fixed one when its only start does.
    """
    if config.window_size == 0 or num_steps <= 0:
        return False
    size = min(config.window_size, num_steps)
    lo, hi = config.window_range
    hi = num_steps if hi == 0 else min(hi, num_steps)
    last_start = max(hi - size, 0)
    latest = min(lo, last_start) if config.window_mode == "fixed" else last_start
    return latest + size >= num_steps
