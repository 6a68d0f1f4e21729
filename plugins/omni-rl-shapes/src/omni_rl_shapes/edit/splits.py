"""The split rule of the edit tasks: disjoint by source scene AND by instruction.

A source scene's *composition* is the set of its (color, shape) objects ("a red circle and a blue square"); every
composition belongs to exactly one split, so no val or test source shows a pair of objects a training source
shows. Every instruction text belongs to exactly one split too, per kind, so no val or test instruction was
seen in training ("make the red circle blue" is train, val or test, whatever the scene). A task is drawn only
from a composition and an instruction of its own split. Both assignments are a pure function of the seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from omni_rl_shapes.edit.tasks import EDIT_KINDS, NOOP_PHRASES, EditKind, instruction_of
from omni_rl_shapes.scenes import COLORS, COUNT_WORDS, RELATIONS, SHAPES

SPLITS: tuple[str, ...] = ("train", "val", "test")
#: the fraction of compositions and of each kind's instructions held out for val and for test (each at least 1)
HELD_OUT = 0.2
Composition = tuple[tuple[str, str], ...]


def all_compositions() -> list[Composition]:
    """Every two-object source composition (two distinct colors, any shapes), sorted."""
    out = []
    for i, a in enumerate(COLORS):
        for b in COLORS[i + 1 :]:
            out += [((a, s), (b, t)) for s in SHAPES for t in SHAPES]
    return sorted(out)


def _objects() -> Iterator[dict[str, str]]:
    for c in COLORS:
        for s in SHAPES:
            yield {"color": c, "shape": s}


def all_instructions(kind: EditKind) -> list[str]:
    """Every instruction text of a kind the grammar can say, sorted."""
    edits: list[dict[str, object]] = []
    if kind == "recolor":
        edits = [{"object": o, "to": c} for o in _objects() for c in COLORS if c != o["color"]]
    elif kind == "move":
        edits = [
            {"object": o, "relation": r, "reference": ref}
            for o in _objects()
            for ref in _objects()
            if ref["color"] != o["color"]
            for r in RELATIONS
        ]
    elif kind in ("add", "remove"):
        edits = [{"object": o} for o in _objects()]
    elif kind == "count":
        edits = [{"object": o, "count": n} for o in _objects() for n in COUNT_WORDS]
    else:
        edits = [{"phrase": p} for p in NOOP_PHRASES]
    return sorted({instruction_of(kind, e) for e in edits})


def _three_way(items: list, rng: random.Random) -> dict[str, list]:
    shuffled = list(items)
    rng.shuffle(shuffled)
    held = max(1, round(HELD_OUT * len(shuffled)))
    return {"val": shuffled[:held], "test": shuffled[held : 2 * held], "train": shuffled[2 * held :]}


def assign(seed: int) -> tuple[dict[str, list[Composition]], dict[str, dict[EditKind, set[str]]]]:
    """(compositions per split, instruction texts per split and kind): disjoint, deterministic for a seed."""
    rng = random.Random(seed)
    compositions = _three_way(all_compositions(), rng)
    instructions: dict[str, dict[EditKind, set[str]]] = {s: {} for s in SPLITS}
    for kind in EDIT_KINDS:
        for split, texts in _three_way(all_instructions(kind), rng).items():
            instructions[split][kind] = set(texts)
    return compositions, instructions
