"""Clips of motion scenes: a still layout of the scene, moved a sampled distance in its direction frame by frame.

Every object moves by the same vector, linearly from the first frame to the last, and stays inside the image in
every frame, so a rendered clip satisfies its prompt in every frame (the still verifier scores each frame 1) and
its motion is known exactly. ``flaw`` renders the failures the motion verifier must catch and a pretrained model
would show: ``"reverse"`` (moving the wrong way), ``"still"`` (not moving), ``"flicker"`` (an object missing from
every other frame) and ``"recolor"`` (the subject changing colour halfway).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from omni_rl_shapes.motion.scenes import VECTORS, MotionScene, parse_motion_prompt
from omni_rl_shapes.render import BORDER, Placed, draw, layout
from omni_rl_shapes.scenes import COLORS, Obj

#: how far the objects travel over a clip, as a fraction of the image side (the still grammar's objects, 0.24-0.34
#: of the side, fit any travel up to 0.6 of it with their border)
DISTANCE_RANGE: tuple[float, float] = (0.2, 0.3)
#: the longest travel a layout fits (fraction of the side)
MAX_TRAVEL = 0.6
FRAMES = 8
Flaw = Literal["reverse", "still", "flicker", "recolor"]
_MAX_TRIES = 500


def _inside(placed: list[Placed], dx: float, dy: float) -> bool:
    for p in placed:
        for cx, cy in ((p.cx, p.cy), (p.cx + dx, p.cy + dy)):
            h = p.size / 2
            if cx - h < BORDER or cy - h < BORDER or cx + h > 1 - BORDER or cy + h > 1 - BORDER:
                return False
    return True


def travel_problem(travel: tuple[float, float]) -> str | None:
    """What is wrong with a travel range, or None: the one check behind render_clip's and pretrain's errors."""
    low, high = travel
    if 0.0 < low <= high <= MAX_TRAVEL:
        return None
    return f"travel must satisfy 0 < LOW <= HIGH <= {MAX_TRAVEL} (fractions of the side), got {tuple(travel)}"


def motion_layout(
    scene: MotionScene, rng: np.random.Generator, travel: tuple[float, float] = DISTANCE_RANGE
) -> tuple[list[Placed], tuple[float, float]]:
    """A first-frame layout of the still scene and the clip's displacement (dx, dy) that keeps it inside: the
    distance is drawn uniformly from ``travel`` (fractions of the side)."""
    problem = travel_problem(travel)
    if problem is not None:
        raise ValueError(problem)
    low, high = travel
    ux, uy = VECTORS[scene.direction]
    for _ in range(_MAX_TRIES):
        distance = float(rng.uniform(low, high))
        placed = layout(scene.still, rng)
        if _inside(placed, ux * distance, uy * distance):
            return placed, (ux * distance, uy * distance)
    raise RuntimeError(f"no layout found for {scene.prompt!r}")  # pragma: no cover - ranges are feasible


def render_clip(
    prompt_or_scene: str | MotionScene,
    size: int = 32,
    frames: int = FRAMES,
    seed: int = 0,
    flaw: Flaw | None = None,
    travel: tuple[float, float] = DISTANCE_RANGE,
) -> np.ndarray:
    """A clip of the prompt: uint8 (frames, size, size, 3). Same prompt, size, frames, seed and ``travel`` (the
    range the distance is drawn from), same clip."""
    if frames < 2:
        raise ValueError(f"a clip needs at least 2 frames, got {frames}")
    scene = parse_motion_prompt(prompt_or_scene) if isinstance(prompt_or_scene, str) else prompt_or_scene
    rng = np.random.default_rng(seed)
    placed, (dx, dy) = motion_layout(scene, rng, travel)
    if flaw == "reverse":  # start where the prompt's clip ends, move back
        placed = [Placed(p.obj, p.cx + dx, p.cy + dy, p.size) for p in placed]
        dx, dy = -dx, -dy
    if flaw == "still":
        dx = dy = 0.0
    out = []
    for t in range(frames):
        f = t / (frames - 1)
        moved = [Placed(p.obj, p.cx + f * dx, p.cy + f * dy, p.size) for p in placed]
        if flaw == "flicker" and t % 2 == 1:
            moved = moved[1:] if len(moved) > 1 else []
        if flaw == "recolor" and t >= frames // 2:
            other = next(c for c in COLORS if c not in {p.obj.color for p in placed})
            moved = [Placed(Obj(other, moved[0].obj.shape), moved[0].cx, moved[0].cy, moved[0].size), *moved[1:]]
        out.append(draw(moved, size))
    return np.stack(out)
