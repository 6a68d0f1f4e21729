"""Edit tasks: a source scene of two objects, an instruction, and the target scene it asks for, exactly.

Every object of a source has its own color, so the verifier (which identifies objects by color) can tell them
apart, and every object of a target keeps a color of its own too (an added object takes a color the source lacks,
a recolour a color the source lacks), except the copies a count edit asks for. Six kinds:

* ``recolor``: "make the red circle blue": the object stays in place, its color changes
* ``move``:    "move the red circle left of the blue square": the source does not satisfy the relation (the
               subject is on the opposite side), the target moves the subject (same size) so that it does
* ``add``:     "add a green triangle": a new object in a free spot
* ``remove``:  "remove the blue square"
* ``count``:   "make it three red circles": the object plus copies of its size in free spots
* ``noop``:    "keep the picture as it is": the target is the source (the control: an editor must not edit)

A target's ``untouched`` objects are the ones the instruction does not mention (the reference of a move too):
the reward checks them against the source. ``fixed`` adds the objects whose place the target fixes (a recoloured
object stays where it was), which ``strict`` also checks. Where a target's place is free (a moved, added or
copied object) the task records one valid placement, which the renderer draws for the target image.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import attrs
import numpy as np

from omni_rl_shapes.render import BORDER, SIZE_RANGE_CROWDED, Placed, _apart, _relation_holds, draw
from omni_rl_shapes.scenes import COLORS, COUNT_WORDS, RELATIONS, SHAPES, Obj

EditKind = Literal["recolor", "move", "add", "remove", "count", "noop"]
EDIT_KINDS: tuple[EditKind, ...] = ("recolor", "move", "add", "remove", "count", "noop")
#: the no-op control's phrasings (split across train / val / test like every other instruction)
NOOP_PHRASES: tuple[str, ...] = (
    "keep the picture as it is",
    "change nothing",
    "leave the image unchanged",
    "do not edit anything",
    "keep every shape where it is",
)
#: how far (unit coordinates) a move's subject starts on the wrong side of its reference, so the source clearly
#: fails the relation the instruction asks for
MOVE_WRONG_SIDE = 0.08
_TRIES = 500


def _obj(p: Placed) -> dict[str, Any]:
    return {
        "color": p.obj.color,
        "shape": p.obj.shape,
        "cx": round(p.cx, 4),
        "cy": round(p.cy, 4),
        "size": round(p.size, 4),
    }


def placed_from(row: dict[str, Any]) -> Placed:
    """An object of a task's metadata back as a renderer placement."""
    return Placed(Obj(row["color"], row["shape"]), float(row["cx"]), float(row["cy"]), float(row["size"]))


@attrs.frozen
class EditTask:
    """One task: ``source`` and ``target`` placements, the instruction, and what the edit is (``edit``: the kind's
    own fields, see :func:`instruction_of`). ``untouched`` / ``fixed`` index ``target``."""

    kind: EditKind
    instruction: str
    source: tuple[Placed, ...]
    target: tuple[Placed, ...]
    untouched: tuple[int, ...]
    fixed: tuple[int, ...]
    edit: dict[str, Any] = attrs.field(eq=False)

    def metadata(self) -> dict[str, Any]:
        """The task's row fields besides ``prompt`` and ``image`` (what the reward reads)."""
        return {
            "kind": self.kind,
            "edit": dict(self.edit),
            "source_objects": [_obj(p) for p in self.source],
            "target_objects": [_obj(p) for p in self.target],
            "untouched": list(self.untouched),
            "fixed": list(self.fixed),
        }

    def render_source(self, size: int) -> np.ndarray:
        """The source drawn from its metadata (coordinates rounded as written), so a row's PNG is exactly what
        :func:`placed_from` of its ``source_objects`` draws."""
        return draw([placed_from(_obj(p)) for p in self.source], size)

    def render_target(self, size: int) -> np.ndarray:
        return draw([placed_from(_obj(p)) for p in self.target], size)


def _along(subject: Placed, reference: Placed, relation: str) -> float:
    """How far the subject is along the relation's direction from the reference (unit coordinates)."""
    dx, dy = subject.cx - reference.cx, subject.cy - reference.cy
    return {"left of": -dx, "right of": dx, "above": -dy, "below": dy}[relation]


def _free_spot(others: Sequence[Placed], obj: Obj, size: float, rng: np.random.Generator) -> Placed | None:
    lo, hi = BORDER + size / 2, 1 - BORDER - size / 2
    for _ in range(_TRIES):
        p = Placed(obj, float(rng.uniform(lo, hi)), float(rng.uniform(lo, hi)), size)
        if all(_apart(p, o) for o in others):
            return p
    return None


def sample_source(rng: np.random.Generator, objects: Sequence[Obj]) -> tuple[Placed, ...]:
    """A layout of ``objects`` (distinct colors) with room to spare: sizes of a three-object scene, so an add or
    a count edit still fits."""
    for _ in range(_TRIES):
        placed: list[Placed] = []
        for obj in objects:
            p = _free_spot(placed, obj, float(rng.uniform(*SIZE_RANGE_CROWDED)), rng)
            if p is None:
                break
            placed.append(p)
        else:
            return tuple(placed)
    raise RuntimeError(f"no layout for {objects}")  # pragma: no cover - two small objects always fit


def candidates(kind: EditKind, source: Sequence[Placed]) -> list[dict[str, Any]]:
    """Every edit of ``kind`` the source admits, as ``edit`` dicts (the instruction is :func:`instruction_of`)."""
    used = {p.obj.color for p in source}
    free_colors = [c for c in COLORS if c not in used]
    out: list[dict[str, Any]] = []
    for i, p in enumerate(source):
        subject = {"color": p.obj.color, "shape": p.obj.shape}
        if kind == "recolor":
            out += [{"index": i, "object": subject, "to": c} for c in free_colors]
        elif kind == "remove":
            out.append({"index": i, "object": subject})
        elif kind == "count":
            out += [{"index": i, "object": subject, "count": n} for n in COUNT_WORDS]
        elif kind == "move":
            for j, q in enumerate(source):
                if j != i:
                    reference = {"color": q.obj.color, "shape": q.obj.shape}
                    for rel in RELATIONS:
                        if _along(p, q, rel) <= -MOVE_WRONG_SIDE:
                            out.append(
                                {"index": i, "object": subject, "relation": rel, "ref_index": j, "reference": reference}
                            )
    if kind == "add":
        out += [{"object": {"color": c, "shape": s}} for c in free_colors for s in SHAPES]
    if kind == "noop":
        out += [{"phrase": phrase} for phrase in NOOP_PHRASES]
    return out


def _phrase(o: dict[str, Any]) -> str:
    return f"{o['color']} {o['shape']}"


def instruction_of(kind: EditKind, edit: dict[str, Any]) -> str:
    """The instruction text of an edit (its text alone decides its split)."""
    if kind == "recolor":
        return f"make the {_phrase(edit['object'])} {edit['to']}"
    if kind == "move":
        return f"move the {_phrase(edit['object'])} {edit['relation']} the {_phrase(edit['reference'])}"
    if kind == "add":
        return f"add a {_phrase(edit['object'])}"
    if kind == "remove":
        return f"remove the {_phrase(edit['object'])}"
    if kind == "count":
        return f"make it {COUNT_WORDS[edit['count']]} {_phrase(edit['object'])}s"
    return str(edit["phrase"])


def apply_edit(
    kind: EditKind, edit: dict[str, Any], source: Sequence[Placed], rng: np.random.Generator
) -> EditTask | None:
    """The task of applying ``edit`` to ``source`` (free placements drawn from ``rng``); None when no placement
    fits (the caller draws another)."""
    src = tuple(source)
    everyone = tuple(range(len(src)))
    text = instruction_of(kind, edit)
    if kind == "noop":
        return EditTask(kind, text, src, src, everyone, everyone, edit)
    if kind == "add":
        o = edit["object"]
        size = float(rng.uniform(*SIZE_RANGE_CROWDED))
        new = _free_spot(src, Obj(o["color"], o["shape"]), size, rng)
        if new is None:
            return None
        return EditTask(kind, text, src, (*src, new), everyone, everyone, edit)
    i = int(edit["index"])
    rest = tuple(p for k, p in enumerate(src) if k != i)
    rest_idx = tuple(range(len(rest)))
    subject = src[i]
    if kind == "remove":
        return EditTask(kind, text, src, rest, rest_idx, rest_idx, edit)
    if kind == "recolor":
        moved = attrs.evolve(subject, obj=Obj(edit["to"], subject.obj.shape))
        return EditTask(kind, text, src, (*rest, moved), rest_idx, (*rest_idx, len(rest)), edit)
    if kind == "count":
        copies = [subject]
        for _ in range(int(edit["count"]) - 1):
            extra = _free_spot((*rest, *copies), subject.obj, subject.size, rng)
            if extra is None:
                return None
            copies.append(extra)
        return EditTask(kind, text, src, (*rest, *copies), rest_idx, (*rest_idx, len(rest)), edit)
    # move: the subject, same size, somewhere the relation holds by the renderer's (stricter) rule
    reference = src[int(edit["ref_index"])]
    lo, hi = BORDER + subject.size / 2, 1 - BORDER - subject.size / 2
    for _ in range(_TRIES):
        p = attrs.evolve(subject, cx=float(rng.uniform(lo, hi)), cy=float(rng.uniform(lo, hi)))
        if all(_apart(p, o) for o in rest) and _relation_holds(p, reference, edit["relation"]):
            return EditTask(kind, text, src, (*rest, p), rest_idx, rest_idx, edit)
    return None
