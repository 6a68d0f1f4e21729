"""What the shapes edit model is pretrained on: (source, instruction, target) triples of the *train* split, and the
flaw of its last stage.

The shipped ``edit/tasks/train.jsonl`` holds 300 tasks; pretraining draws more from the same split (its
compositions and instruction texts only, :mod:`omni_rl_shapes.edit.splits`, with seeds of their own), so val and
test stay unseen. Each task's target is rendered clean, or, with probability ``flaw_rate``, with the flaw
``disturb``: one object the instruction does not touch is moved to another free spot (a teleport of at least
:data:`DISTURB_MIN_SHIFT` of the side), the habit of editing models that redraw the whole picture. The
``shapes_edit`` reward's ``preserve`` sees it (the object is not where the source had it) and RL can remove it:
a sample that keeps the object in place scores higher in its group.
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs
import numpy as np

from omni_rl_shapes.edit.make_tasks import SEED, TASK_DIR, draw_task
from omni_rl_shapes.edit.tasks import EDIT_KINDS, placed_from
from omni_rl_shapes.render import BORDER, Placed, _apart, draw

#: the values of ``--flaw``
EDIT_FLAWS = ("disturb",)
#: a disturbed object lands at least this far (fraction of the side) from where the source has it: twice the
#: reward's default position tolerance, so preserve sees it
DISTURB_MIN_SHIFT = 0.2
#: seeds of the extra train tasks start here (the shipped split's are SEED * 1000 + k)
EXTRA_SEED_OFFSET = 7_000_000
#: offset of the generator that decides whether (and how) a training target is flawed
_FLAW_SEED = 4_243


@attrs.frozen
class EditSample:
    """One training pair: the instruction, the source and the (possibly flawed) target, uint8 (H, W, 3)."""

    prompt: str
    source: np.ndarray
    target: np.ndarray


def shipped_train_rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in (TASK_DIR / "train.jsonl").read_text(encoding="utf-8").splitlines()]


def extra_train_rows(count: int, size: int) -> list[dict[str, Any]]:
    """``count`` more train-split tasks (kinds interleaved), as rows of the shipped file's fields."""
    from omni_rl_shapes.edit.config import ShapesEditRewardConfig
    from omni_rl_shapes.edit.splits import assign

    plan, config = assign(SEED), ShapesEditRewardConfig()
    rows = []
    for k in range(count):
        kind = EDIT_KINDS[k % len(EDIT_KINDS)]
        task = draw_task(kind, "train", EXTRA_SEED_OFFSET + k, size, plan, config)
        rows.append({"prompt": task.instruction, "seed": EXTRA_SEED_OFFSET + k, **task.metadata()})
    return rows


def disturbed(row: dict[str, Any], rng: np.random.Generator) -> list[Placed] | None:
    """The row's target with one untouched object moved to a free spot far from its place (None: none fits)."""
    target = [placed_from(o) for o in row["target_objects"]]
    if not row["untouched"]:
        return None
    i = int(row["untouched"][int(rng.integers(len(row["untouched"])))])
    moved = target[i]
    others = [p for k, p in enumerate(target) if k != i]
    lo, hi = BORDER + moved.size / 2, 1 - BORDER - moved.size / 2
    for _ in range(200):
        p = attrs.evolve(moved, cx=float(rng.uniform(lo, hi)), cy=float(rng.uniform(lo, hi)))
        far = math.hypot(p.cx - moved.cx, p.cy - moved.cy) >= DISTURB_MIN_SHIFT
        if far and all(_apart(p, o) for o in others):
            return [*others, p]
    return None


def training_samples(
    rows: list[dict[str, Any]], size: int, flaw: str | None, flaw_rate: float, seed: int
) -> tuple[list[EditSample], int]:
    """Every row as a training pair (its target flawed with probability ``flaw_rate``); and how many were."""
    samples, flawed = [], 0
    for k, row in enumerate(rows):
        rng = np.random.default_rng([_FLAW_SEED, seed, k])
        source = draw([placed_from(o) for o in row["source_objects"]], size)
        objects = [placed_from(o) for o in row["target_objects"]]
        if flaw == "disturb" and rng.random() < flaw_rate and (moved := disturbed(row, rng)) is not None:
            objects, flawed = moved, flawed + 1
        samples.append(EditSample(row["prompt"], source, draw(objects, size)))
    return samples, flawed


def rows_for(extra: int, size: int) -> list[dict[str, Any]]:
    """The shipped train tasks plus ``extra`` drawn ones."""
    return shipped_train_rows() + extra_train_rows(extra, size)
