"""The scene renderer: a prompt (or scene) and a seed to a small RGB image that satisfies the prompt.

Layouts are sampled in unit coordinates by rejection, with margins wider than the verifier's thresholds, so
every rendered image verifies as correct while positions and sizes still vary enough for a model to learn
the concepts rather than memorise pixels. Shapes are drawn 4x supersampled and box-downsampled: antialiased
edges look like what a diffusion model produces, and the verifier must handle them anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np
from PIL import Image, ImageDraw

from omni_rl_shapes.scenes import BACKGROUND, PALETTE, Obj, Scene, parse_prompt

#: bounding-box side of an object, as a fraction of the image side: (min, max) for 1-2 objects and for 3
SIZE_RANGE: tuple[float, float] = (0.24, 0.34)
SIZE_RANGE_CROWDED: tuple[float, float] = (0.2, 0.27)
#: free space kept between objects and between an object and the border (fraction of the image side)
GAP = 0.07
BORDER = 0.03
#: an object "on the left" has its centre at x <= POSITION_BAND (mirrored for right, top, bottom)
POSITION_BAND = 0.35
#: the two objects of a relation are at least this far apart along the relation's axis, and their offset
#: across it is at most RELATION_SLOPE times that distance (so the direction is unambiguous)
RELATION_MIN_DISTANCE = 0.3
RELATION_SLOPE = 0.5
SUPERSAMPLE = 4
_MAX_TRIES = 2000
#: a stray object (pretraining data only, see :func:`render_with_stray`): its bounding-box side and shapes.
#: A 0.16 square covers fewer pixels than the smallest triangle of a one- or two-object scene (side 0.24), a
#: 0.13 circle still more than the verifier's ``min_area``.
STRAY_SIZE_RANGE: tuple[float, float] = (0.13, 0.16)
STRAY_SHAPES: tuple[str, ...] = ("circle", "square")


@attrs.frozen
class Placed:
    """An object placed in unit coordinates: centre (cx, cy) and bounding-box side ``size``."""

    obj: Obj
    cx: float
    cy: float
    size: float

    def box(self) -> tuple[float, float, float, float]:
        h = self.size / 2
        return (self.cx - h, self.cy - h, self.cx + h, self.cy + h)


def _apart(a: Placed, b: Placed) -> bool:
    """True when the boxes, each grown by half the gap, do not touch (separate connected components)."""
    reach = (a.size + b.size) / 2 + GAP
    return abs(a.cx - b.cx) >= reach or abs(a.cy - b.cy) >= reach


def _relation_holds(a: Placed, b: Placed, relation: str) -> bool:
    dx, dy = b.cx - a.cx, b.cy - a.cy  # from the subject to the reference
    along, across = {
        "left of": (dx, dy),
        "right of": (-dx, dy),
        "above": (dy, dx),
        "below": (-dy, dx),
    }[relation]
    return along >= RELATION_MIN_DISTANCE and abs(across) <= RELATION_SLOPE * along


def _centre_range(size: float, position: str | None, axis: str) -> tuple[float, float]:
    lo, hi = BORDER + size / 2, 1 - BORDER - size / 2
    if (position == "left" and axis == "x") or (position == "top" and axis == "y"):
        hi = min(hi, POSITION_BAND)
    if (position == "right" and axis == "x") or (position == "bottom" and axis == "y"):
        lo = max(lo, 1 - POSITION_BAND)
    return lo, hi


def layout(scene: Scene, rng: np.random.Generator) -> list[Placed]:
    """Sample object placements that satisfy ``scene`` (subject copies first, then the reference)."""
    objects = scene.objects
    lo, hi = SIZE_RANGE_CROWDED if len(objects) >= 3 else SIZE_RANGE
    for _ in range(_MAX_TRIES):
        placed: list[Placed] = []
        for obj in objects:
            size = float(rng.uniform(lo, hi))
            x0, x1 = _centre_range(size, scene.position, "x")
            y0, y1 = _centre_range(size, scene.position, "y")
            placed.append(Placed(obj, float(rng.uniform(x0, x1)), float(rng.uniform(y0, y1)), size))
        if not all(_apart(a, b) for i, a in enumerate(placed) for b in placed[i + 1 :]):
            continue
        if scene.relation is not None and not _relation_holds(placed[0], placed[1], scene.relation):
            continue
        return placed
    raise RuntimeError(f"no layout found for {scene.prompt!r}")  # pragma: no cover - ranges are feasible


def draw(placed: Sequence[Placed], size: int) -> np.ndarray:
    """Rasterise placed objects on the background: uint8 (size, size, 3), antialiased by supersampling."""
    big = size * SUPERSAMPLE
    image = Image.new("RGB", (big, big), BACKGROUND)
    pen = ImageDraw.Draw(image)
    for p in placed:
        x0, y0, x1, y1 = (v * big for v in p.box())
        fill = PALETTE[p.obj.color]
        if p.obj.shape == "circle":
            pen.ellipse((x0, y0, x1, y1), fill=fill)
        elif p.obj.shape == "square":
            pen.rectangle((x0, y0, x1, y1), fill=fill)
        else:  # upright triangle filling its box: apex at the top centre
            pen.polygon([(x0, y1), (x1, y1), ((x0 + x1) / 2, y0)], fill=fill)
    return np.asarray(image.reduce(SUPERSAMPLE), dtype=np.uint8)


def render(prompt_or_scene: str | Scene, size: int = 32, seed: int = 0) -> np.ndarray:
    """An image of the prompt: uint8 (size, size, 3). Same prompt, size and seed give the same image."""
    return render_with_stray(prompt_or_scene, size, seed, rate=0.0)


def add_stray(placed: Sequence[Placed], rng: np.random.Generator) -> list[Placed] | None:
    """The layout plus one small unmentioned object in a free spot, or None when no spot is free.

    The stray takes the color of one of the scene's objects: the extra object a caption leaves out. It covers
    fewer pixels than any object of a one- or two-object scene, so "the largest component of a color" (what
    the verifier's position checks read) stays the object the prompt is about.
    """
    for _ in range(_MAX_TRIES // 10):
        size = float(rng.uniform(*STRAY_SIZE_RANGE))
        lo, hi = BORDER + size / 2, 1 - BORDER - size / 2
        obj = Obj(placed[int(rng.integers(len(placed)))].obj.color, STRAY_SHAPES[int(rng.integers(len(STRAY_SHAPES)))])
        stray = Placed(obj, float(rng.uniform(lo, hi)), float(rng.uniform(lo, hi)), size)
        if all(_apart(stray, p) for p in placed):
            return [*placed, stray]
    return None


def render_with_stray(
    prompt_or_scene: str | Scene, size: int = 32, seed: int = 0, rate: float = 0.0, strays: int = 1
) -> np.ndarray:
    """Like :func:`render`, but with probability ``rate`` the image also shows ``strays`` unmentioned objects.

    Pretraining data only: it models web captions that leave out objects, the reason real text-to-image
    models over-count (GenEval's counting failures), so the base model learns to add extra objects that
    CFG cannot remove (the strays are independent of the caption given the scene) and RL can. With ``rate = 0``
    the image is exactly ``render``'s, and ``strays = 1`` draws exactly what it always drew (the second stray
    only appends draws to the generator); a stray is skipped when the layout leaves no free spot for it.
    """
    if size < 16:
        raise ValueError(f"size must be at least 16 px, got {size}")
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"rate must be in [0, 1], got {rate}")
    if strays < 1:
        raise ValueError(f"strays must be at least 1, got {strays}")
    scene = parse_prompt(prompt_or_scene) if isinstance(prompt_or_scene, str) else prompt_or_scene
    rng = np.random.default_rng(seed)
    placed = layout(scene, rng)
    if rate > 0 and rng.random() < rate:
        for _ in range(strays):
            placed = add_stray(placed, rng) or placed
    return draw(placed, size)


def render_batch(prompts: Sequence[str | Scene], size: int = 32, seeds: Sequence[int] | None = None) -> np.ndarray:
    """Images of several prompts, uint8 (N, size, size, 3); seeds default to 0..N-1."""
    seeds = range(len(prompts)) if seeds is None else seeds
    return np.stack([render(p, size, s) for p, s in zip(prompts, seeds, strict=True)])
