"""The SDE window (Flow-GRPO-Fast, MixGRPO): which schedule steps are stochastic and trained.

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
import random
from typing import Any, Literal

import attrs

from omni_rl.validators import non_negative_int

WindowMode = Literal["random", "fixed"]
WINDOW_MODES: tuple[str, ...] = ("random", "fixed")


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


@attrs.frozen(kw_only=True)
class WindowConfig:
    """Window options shared by every stochastic sampler's config (see the module docstring)."""

    #: number of consecutive stochastic (trained) steps; 0 = every step but the last
    window_size: int = attrs.field(default=0, validator=non_negative_int)
    #: the window lies within steps [lo, hi) (hi = 0: the end of the schedule); start ~ U{lo, …, hi - W}
    window_range: tuple[int, int] = attrs.field(default=(0, 0), converter=tuple, validator=_window_range)
    #: "random": start drawn per training step (seeded by run seed and step, so all workers agree);
    #: "fixed": start = window_range[0] every step
    window_mode: WindowMode = attrs.field(default="random", validator=attrs.validators.in_(WINDOW_MODES))


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
    start = _step_rng(seed, step).randint(first_start, last_start)
    return range(start, start + size)


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
