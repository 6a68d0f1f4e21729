"""The ``shapes_edit`` reward on rendered edits with known answers: the target scores 1, the unedited source
scores edit 0 (the no-op control 1), a redrawn scene loses preserve, each kind, and the tolerance edges."""

from __future__ import annotations

import json
from typing import Any

import attrs
import numpy as np
import pytest
from omni_rl_shapes.edit.config import ShapesEditRewardConfig
from omni_rl_shapes.edit.make_tasks import TASK_DIR
from omni_rl_shapes.edit.reward import ShapesEditReward, score_edit
from omni_rl_shapes.edit.tasks import EDIT_KINDS, EditTask, apply_edit, candidates, placed_from
from omni_rl_shapes.hooks import omni_rl_reward_models
from omni_rl_shapes.render import Placed, draw
from omni_rl_shapes.scenes import Obj
from PIL import Image

from omni_rl.errors import RuntimeFailure
from omni_rl.rewards.frames import call_reward
from omni_rl.specs import RewardSpec
from omni_rl.testing.reward import RewardConformance

SIZE = 64
CONFIG = ShapesEditRewardConfig()
#: a red circle at the top left, a blue square right of it and a little lower
SOURCE = (Placed(Obj("red", "circle"), 0.25, 0.25, 0.24), Placed(Obj("blue", "square"), 0.65, 0.4, 0.24))


def _task(kind: str, **match: Any) -> EditTask:
    """The first edit of ``kind`` on SOURCE whose fields include ``match``."""
    rng = np.random.default_rng(0)
    for edit in candidates(kind, SOURCE):  # type: ignore[arg-type]
        if all(edit.get(k) == v for k, v in match.items()):
            task = apply_edit(kind, edit, SOURCE, rng)  # type: ignore[arg-type]
            assert task is not None
            return task
    raise AssertionError(f"no {kind} edit with {match}")


def _score(image: np.ndarray, task: EditTask, source: np.ndarray | None = None) -> tuple[float, float, bool, float]:
    v = score_edit(image, task.metadata(), CONFIG, source)
    return v.edit, v.preserve, v.strict, v.score


TASKS = {
    "recolor": dict(to="green", index=0),
    "move": dict(relation="below", index=0),
    "add": dict(object={"color": "yellow", "shape": "triangle"}),
    "remove": dict(index=1),
    "count": dict(count=3, index=1),
    "noop": dict(phrase="change nothing"),
}


@pytest.mark.parametrize("kind", EDIT_KINDS)
def test_the_target_scores_one_and_the_source_scores_edit_zero(kind: str) -> None:
    task = _task(kind, **TASKS[kind])
    source = task.render_source(SIZE)
    for given in (source, None):  # with the condition image, and from the metadata alone
        assert _score(task.render_target(SIZE), task, given) == (1.0, 1.0, True, 1.0)
        edit, preserve, strict, score = _score(source, task, given)
        if kind == "noop":
            assert (edit, preserve, strict, score) == (1.0, 1.0, True, 1.0)
        else:
            assert edit == 0.0 and not strict and score == 0.0


def test_instructions_read_as_asked() -> None:
    assert _task("recolor", **TASKS["recolor"]).instruction == "make the red circle green"
    assert _task("move", **TASKS["move"]).instruction == "move the red circle below the blue square"
    assert _task("add", **TASKS["add"]).instruction == "add a yellow triangle"
    assert _task("remove", **TASKS["remove"]).instruction == "remove the blue square"
    assert _task("count", **TASKS["count"]).instruction == "make it three blue squares"


@pytest.mark.parametrize("kind", ["recolor", "add", "remove", "count", "move"])
def test_redrawing_everything_loses_preserve(kind: str) -> None:
    """The edit done, but the untouched objects redrawn: elsewhere (mirrored through the centre), or in place as
    another shape."""
    task = _task(kind, **TASKS[kind])
    untouched = set(task.untouched)
    other = {"circle": "triangle", "square": "circle", "triangle": "square"}
    mirrored = [attrs.evolve(p, cx=1 - p.cx, cy=1 - p.cy) if k in untouched else p for k, p in enumerate(task.target)]
    reshaped = [
        attrs.evolve(p, obj=Obj(p.obj.color, other[p.obj.shape])) if k in untouched else p
        for k, p in enumerate(task.target)
    ]
    for redrawn in (mirrored, reshaped):
        image = draw(redrawn, SIZE)
        edit, preserve, strict, score = _score(image, task, task.render_source(SIZE))
        assert preserve == 0.0 and not strict and score == 0.0
        if kind != "move":  # a move's edit is measured on its (untouched, here redrawn) reference too
            assert edit == 1.0


def test_wrong_changes_lower_edit() -> None:
    recolor = _task("recolor", **TASKS["recolor"])
    # the new green circle, but a red one is still there
    both = draw([*recolor.target, attrs.evolve(SOURCE[0], cy=0.75)], SIZE)
    edit, preserve, _, _ = _score(both, recolor)
    assert edit == 0.0 and preserve == 0.5  # and one object too many
    count = _task("count", count=3, index=1)
    two = draw(count.target[:-1], SIZE)  # two blue squares, not three
    assert _score(two, count)[0] == 0.0
    add = _task("add", **TASKS["add"])
    wrong_shape = draw([*SOURCE, attrs.evolve(add.target[-1], obj=Obj("yellow", "circle"))], SIZE)
    assert _score(wrong_shape, add)[0] == 0.0


def test_an_extra_object_costs_preserve_and_strict() -> None:
    noop = _task("noop", **TASKS["noop"])
    extra = draw([*SOURCE, Placed(Obj("green", "triangle"), 0.5, 0.15, 0.22)], SIZE)
    edit, preserve, strict, score = _score(extra, noop)
    assert edit == 1.0 and preserve == pytest.approx(2 / 3) and not strict and score == pytest.approx(2 / 3)


@pytest.mark.parametrize(("shift", "kept"), [(0.0, True), (0.06, True), (0.085, True), (0.12, False), (0.2, False)])
def test_position_tolerance_edges(shift: float, kept: bool) -> None:
    """The untouched blue square moved by ``shift`` (tolerance 0.1 of the side, box centres measured in pixels)."""
    task = _task("remove", index=0)  # remove the red circle: the blue square is untouched
    moved = draw([attrs.evolve(SOURCE[1], cy=0.4 + shift)], SIZE)
    edit, preserve, strict, _ = _score(moved, task, task.render_source(SIZE))
    assert edit == 1.0 and preserve == float(kept) and strict == kept


@pytest.mark.parametrize(("scale", "kept"), [(1.0, True), (1.2, True), (0.8, True), (1.45, False), (0.6, False)])
def test_size_tolerance_edges(scale: float, kept: bool) -> None:
    task = _task("remove", index=0)
    resized = draw([attrs.evolve(SOURCE[1], size=0.24 * scale)], SIZE)
    assert _score(resized, task, task.render_source(SIZE))[1] == float(kept)


def test_a_changed_shape_or_color_is_not_preserved() -> None:
    task = _task("remove", index=0)
    for obj in (Obj("blue", "circle"), Obj("yellow", "square")):
        assert _score(draw([attrs.evolve(SOURCE[1], obj=obj)], SIZE), task)[1] == 0.0


def test_a_recoloured_object_out_of_place_is_not_strict() -> None:
    task = _task("recolor", **TASKS["recolor"])
    recoloured = task.target[-1]
    image = draw([*task.target[:-1], attrs.evolve(recoloured, cy=0.15)], SIZE)
    assert _score(image, task)[:3] == (1.0, 1.0, False)


def test_shipped_targets_are_strict_and_sources_are_not_edits() -> None:
    rows = [json.loads(line) for line in (TASK_DIR / "val.jsonl").read_text().splitlines()]
    images = [np.asarray(Image.open(TASK_DIR / r["target_image"]).convert("RGB")) for r in rows]
    sources = [np.asarray(Image.open(TASK_DIR / r["image"]).convert("RGB")) for r in rows]
    reward = ShapesEditReward()
    prompts = [r["prompt"] for r in rows]
    conditions = [(s,) for s in sources]
    result = call_reward(reward, np.stack(images), prompts, rows, conditions)
    assert result.scores.tolist() == [1.0] * len(rows) and result.details["strict"].tolist() == [1.0] * len(rows)
    unedited = call_reward(reward, np.stack(sources), prompts, rows, conditions)
    noop = np.array([r["kind"] == "noop" for r in rows])
    assert (unedited.scores[noop] == 1.0).all() and (unedited.details["edit"][~noop] == 0.0).all()


def test_rows_without_task_metadata_are_one_clear_error() -> None:
    with pytest.raises(RuntimeFailure, match="lacks kind, edit"):
        ShapesEditReward()(np.zeros((1, 32, 32, 3), np.uint8), ["make it blue"], [{}], conditions=[()])


def test_strict_only_without_partial_credit() -> None:
    task = _task("noop", **TASKS["noop"])
    extra = draw([*SOURCE, Placed(Obj("green", "triangle"), 0.5, 0.15, 0.22)], SIZE)
    assert score_edit(extra, task.metadata(), ShapesEditRewardConfig(partial_credit=False)).score == 0.0


class TestShapesEditReward(RewardConformance):
    @pytest.fixture
    def spec(self) -> RewardSpec:
        (spec,) = [s for s in omni_rl_reward_models() if s.name == "shapes_edit"]
        return spec

    @pytest.fixture
    def metadata(self, images: np.ndarray) -> list[dict[str, Any]]:
        rows = [json.loads(line) for line in (TASK_DIR / "val.jsonl").read_text().splitlines()]
        return [rows[i // 2] for i in range(len(images))]  # two samples per task, as a group

    @pytest.fixture
    def prompts(self, metadata: list[dict[str, Any]]) -> list[str]:
        return [m["prompt"] for m in metadata]

    @pytest.fixture
    def images(self) -> np.ndarray:
        rows = [json.loads(line) for line in (TASK_DIR / "val.jsonl").read_text().splitlines()][:2]
        targets = [draw([placed_from(o) for o in r["target_objects"]], 48) for r in rows]
        noise = np.random.default_rng(0).integers(0, 256, size=(2, 48, 48, 3), dtype=np.uint8)
        return np.stack([targets[0], noise[0], noise[1], targets[1]])
