"""Shapes in motion: the grammar parses back every prompt it writes, rendered clips move exactly as asked, and the
clip verifier's sub-scores say what they mean on clips of known motion: 1 for the asked motion, 0 for the wrong way
or none, consistency broken by flicker and colour changes, proportional credit for a short travel; the reward takes
whole clips (``scores_video``) through the core's frame wrapper."""

from __future__ import annotations

import numpy as np
import pytest
from omni_rl_shapes.motion.config import ShapesMotionRewardConfig
from omni_rl_shapes.motion.render import render_clip
from omni_rl_shapes.motion.reward import ShapesMotionReward
from omni_rl_shapes.motion.scenes import all_motion_scenes, parse_motion_prompt
from omni_rl_shapes.motion.verify import verify_clip
from omni_rl_shapes.render import Placed, draw
from omni_rl_shapes.scenes import Obj

from omni_rl.batch import RewardResult
from omni_rl.rewards.frames import FrameRewards

SCENES = list(all_motion_scenes())
#: a fixed sample of the grammar (every direction and both kinds), so the test stays fast
SAMPLE = [SCENES[i] for i in np.random.default_rng(0).choice(len(SCENES), 60, replace=False)]


def test_the_grammar_round_trips_and_refuses_what_it_cannot_track() -> None:
    assert len(SCENES) == 4 * 12 + 4 * 4 * 12 * 9
    for scene in SCENES:
        assert parse_motion_prompt(scene.prompt) == scene
    assert parse_motion_prompt("A red circle moving to the right.").direction == "right"
    assert parse_motion_prompt("a blue square above a green triangle, both moving down").still.kind == "relation"
    for bad in ("two red circles moving up", "a red circle on the left moving up", "a red circle", "a red circle "
                "left of a blue square moving up", "a red circle, both moving up"):  # fmt: skip
        with pytest.raises(ValueError):
            parse_motion_prompt(bad)


@pytest.mark.parametrize("k", range(len(SAMPLE)))
def test_rendered_clips_verify_as_correct(k: int) -> None:
    scene = SAMPLE[k]
    clip = render_clip(scene, size=32, frames=8, seed=k)
    assert clip.shape == (8, 32, 32, 3) and clip.dtype == np.uint8
    verdict = verify_clip(clip, scene)
    assert verdict.strict and verdict.score == 1.0, (scene.prompt, verdict)


@pytest.mark.parametrize(
    ("flaw", "bad"),
    [("reverse", "motion"), ("still", "motion"), ("flicker", "consistency"), ("recolor", "consistency")],
)
def test_each_flaw_costs_its_sub_score(flaw: str, bad: str) -> None:
    verdicts = [verify_clip(render_clip(s, seed=k, flaw=flaw), s) for k, s in enumerate(SAMPLE[:20])]
    assert all(getattr(v, bad) < 1.0 for v in verdicts)
    assert all(v.score < 0.5 for v in verdicts)
    if flaw in ("reverse", "still"):  # every frame is a right still image: only the motion is wrong
        assert all(v.frame == 1.0 and v.consistency == 1.0 and v.motion == 0.0 for v in verdicts)


def _clip_of(start: float, end: float, frames: int = 6, size: int = 32) -> np.ndarray:
    """A red circle (side 0.25) moving from x = start to x = end at y = 0.5."""
    obj = Obj("red", "circle")
    xs = np.linspace(start, end, frames)
    return np.stack([draw([Placed(obj, float(x), 0.5, 0.25)], size) for x in xs])


def test_motion_credit_is_proportional_below_min_distance() -> None:
    config = ShapesMotionRewardConfig(min_distance=0.2)
    full = verify_clip(_clip_of(0.25, 0.6), "a red circle moving to the right", config)
    half = verify_clip(_clip_of(0.3, 0.4), "a red circle moving to the right", config)
    wrong = verify_clip(_clip_of(0.6, 0.25), "a red circle moving to the right", config)
    assert full.motion == 1.0
    assert half.motion == pytest.approx(0.5, abs=0.1)  # 0.1 of the side travelled (pixel-rounded), 0.2 asked
    assert wrong.motion == 0.0
    assert verify_clip(_clip_of(0.6, 0.25), "a red circle moving to the left", config).motion == 1.0


def test_a_teleport_breaks_consistency() -> None:
    clip = _clip_of(0.25, 0.35, frames=4)
    jumped = np.concatenate([clip[:2], _clip_of(0.75, 0.75, frames=2)])  # half the image in one frame
    verdict = verify_clip(jumped, "a red circle moving to the right")
    assert verdict.consistency == pytest.approx(2 / 3)  # 1 of 3 pairs broken
    assert verify_clip(clip, "a red circle moving to the right").consistency == 1.0


def test_the_reward_scores_whole_clips_through_the_core_wrapper() -> None:
    prompts = [SAMPLE[0].prompt, SAMPLE[1].prompt, SAMPLE[2].prompt]
    clips = np.stack([render_clip(prompts[0], seed=1), render_clip(prompts[1], seed=2, flaw="still"),
                      render_clip(prompts[2], seed=3, flaw="flicker")])  # fmt: skip
    reward = ShapesMotionReward()
    assert reward.scores_video
    result = RewardResult.coerce(FrameRewards(reward, "mean")(clips, prompts, [{}] * 3))
    np.testing.assert_allclose(result.scores[0], 1.0)
    assert result.scores[1] == 0.0 and result.details["motion"][1] == 0.0
    assert result.details["consistency"][2] < 1.0
    assert set(result.details) == {"frame", "motion", "consistency", "strict"}
    with pytest.raises(ValueError, match="clips"):
        reward(clips[:, 0], prompts)


def test_the_reward_is_registered() -> None:
    from omni_rl_shapes.hooks import omni_rl_reward_models

    assert {spec.name for spec in omni_rl_reward_models()} == {"shapes", "shapes_motion", "shapes_edit"}
