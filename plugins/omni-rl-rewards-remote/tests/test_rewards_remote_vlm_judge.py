"""``vlm_judge`` against a local OpenAI-compatible stand-in (conftest.FakeVlm): the request it sends, how
replies become scores, retries, timeouts, failures scored 0 and counted, and the API key kept out of every
message, log line, metric and pickle."""

from __future__ import annotations

import base64
import io
import logging
import pickle
import time
from typing import Any

import numpy as np
import pytest
from omni_rl_rewards_remote import hooks
from PIL import Image
from remote_fakes import SLEEP_S, FakeVlm

from omni_rl.config import structure_options
from omni_rl.config.schema import ResolvedComponent
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.rewards.combined import CombinedReward
from omni_rl.specs import RewardSpec

KEY = "sk-test-0123456789-do-not-print"
KEY_ENV = "OMNI_RL_TEST_VLM_KEY"
IMAGES = np.random.default_rng(0).integers(0, 256, size=(4, 8, 8, 3), dtype=np.uint8)
FAST = {"backoff_s": 0.01, "max_backoff_s": 0.05}


def _spec() -> RewardSpec:
    (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == "vlm_judge"]
    return spec


def _judge(fake: FakeVlm, **options: Any) -> Any:
    spec = _spec()
    return spec.factory(structure_options(spec, {"base_url": fake.url, "model": "judge", **FAST, **options}), None)


def _score(reward: Any, prompts: list[str]) -> Any:
    return reward(IMAGES[: len(prompts)], prompts, [{}] * len(prompts))


def test_the_request_is_a_standard_chat_completion_with_the_image_inline(fake_vlm: FakeVlm) -> None:
    reward = _judge(fake_vlm, template="alignment", system_prompt="be strict", max_tokens=64)
    _score(reward, ["a red cube {reply:Final Score: 4}"])
    (body,) = fake_vlm.bodies
    assert body["model"] == "judge" and body["max_tokens"] == 64 and body["temperature"] == 0.0
    assert body["messages"][0] == {"role": "system", "content": "be strict"}
    image_part, text_part = body["messages"][1]["content"]
    assert image_part["type"] == "image_url" and text_part["type"] == "text"
    url = image_part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    sent = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    np.testing.assert_array_equal(sent, IMAGES[0])  # lossless: the judge sees the rollout's pixels
    assert "Caption: a red cube {reply:Final Score: 4}" in text_part["text"]
    assert fake_vlm.authorization == [""]  # no api_key_env: no Authorization header


@pytest.mark.parametrize(
    ("options", "reply", "score"),
    [
        ({"template": "alignment"}, "The cube is red but too small.\nFinal Score: 4", 0.75),
        ({"template": "quality"}, "**Final Score**: 1", 0.0),
        ({"template": "matches"}, "Yes.", 1.0),
        ({"template": "matches"}, "No, it shows a dog", 0.0),
        ({"template": "Rate {prompt} from 0 to 10.", "parser": "number"}, "I'd say 7/10", 0.7),
        ({"template": "Rate {prompt}.", "parser": "number", "number_range": [-1, 1]}, "score: 0.5", 0.75),
        ({"template": "Rate {prompt}.", "parser": "scale_1_5"}, "3 out of 5", 0.5),
    ],
)
def test_replies_become_scores_in_0_1(fake_vlm: FakeVlm, options: dict[str, Any], reply: str, score: float) -> None:
    result = _score(_judge(fake_vlm, **options), [f"a cube {{reply:{reply}}}"])
    assert result.scores.tolist() == pytest.approx([score]) and result.failures == 0


def test_ocr_by_vlm_scores_the_text_read_back_with_the_ocr_formula(fake_vlm: FakeVlm) -> None:
    prompts = [
        'a sign that says "Open Late" {reply:OPEN LATE}',
        'a sign that says "Open Late" {reply:Text: "Opn Late"}',  # one edit of 8 characters
        'a sign that says "Open Late" {reply:}',  # read nothing
    ]
    # the ocr preset's text has no {prompt}; a template of one's own carries the directive to the fake server
    result = _score(_judge(fake_vlm, template="Read the text. {prompt}", parser="ocr"), prompts)
    assert result.scores.tolist() == pytest.approx([1.0, 1.0 - 1 / 8, 0.0])
    with pytest.raises(RuntimeFailure, match="no double-quoted target"):
        _score(_judge(fake_vlm, template="ocr"), ["no quotes here"])  # a data mistake, found before any call


def test_transient_errors_are_retried_and_final_ones_are_not(fake_vlm: FakeVlm) -> None:
    reward = _judge(fake_vlm, template="matches", max_retries=2)
    result = _score(reward, ["{flaky:yes}", "{down}", "{denied}", "{garbage}"])
    assert result.scores.tolist() == [1.0, 0.0, 0.0, 0.0]
    assert result.failures == 3
    calls = {text.split("? ")[1].split("\n")[0]: n for text, n in fake_vlm.calls.items()}
    assert calls == {"{flaky:yes}": 2, "{down}": 3, "{denied}": 1, "{garbage}": 1}  # 401 and non-chat JSON are final


def test_a_judge_slower_than_the_timeout_scores_0_without_waiting_for_it(fake_vlm: FakeVlm) -> None:
    reward = _judge(fake_vlm, template="matches", timeout_s=0.3, max_retries=1)
    start = time.perf_counter()
    result = _score(reward, ["{sleep:yes}", "{reply:yes}"])
    elapsed = time.perf_counter() - start
    assert result.scores.tolist() == [0.0, 1.0] and result.failures == 1
    assert elapsed < SLEEP_S  # two 0.3 s attempts, not the server's 1.5 s


def test_failures_are_counted_in_the_reward_metrics_and_never_stop_the_run(fake_vlm: FakeVlm) -> None:
    spec = _spec()
    options = structure_options(spec, {"base_url": fake_vlm.url, "model": "judge", "template": "matches", **FAST})
    combined = CombinedReward([ResolvedComponent(kind="reward", name="vlm_judge", spec=spec, options=options)], None)
    scored = combined(IMAGES[:3], ["{reply:yes}", "{denied}", "{down}"], [{}] * 3)
    metrics = scored.metrics()
    assert metrics["reward/vlm_judge/failures"] == 2.0
    assert metrics["reward/vlm_judge/mean"] == pytest.approx(1 / 3)


def test_the_api_key_is_sent_but_never_shown(
    fake_vlm: FakeVlm, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    reward = _judge(fake_vlm, template="matches", api_key_env=KEY_ENV, max_retries=0)
    with caplog.at_level(logging.DEBUG):
        result = _score(reward, ["{reply:yes}", "{down}"])  # the server echoes the header in its error body
    assert fake_vlm.authorization[0] == f"Bearer {KEY}"
    assert result.failures == 1
    assert "***" in caplog.text and KEY not in caplog.text
    assert KEY not in repr(reward) and KEY.encode() not in pickle.dumps(reward)  # not carried into Ray actors
    assert KEY not in str(CombinedReward.__name__) and KEY not in str(result)


def test_an_unset_key_variable_fails_the_build_by_name(fake_vlm: FakeVlm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"{KEY_ENV} \\(options.api_key_env\\) is not set"):
        _judge(fake_vlm, api_key_env=KEY_ENV)


def test_a_key_pasted_into_api_key_env_is_refused_without_echoing_it() -> None:
    with pytest.raises(ConfigError) as caught:
        structure_options(_spec(), {"base_url": "http://h/v1", "model": "m", "api_key_env": KEY})
    assert "NAME of an environment variable" in caught.value.message and "@ $.reward.options.api_key_env" in str(
        caught.value
    )
    assert KEY not in str(caught.value)


def test_template_and_parser_problems_are_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"template of your own with \{prompt\}.*@ \$\.reward\.options\.template"):
        structure_options(_spec(), {"base_url": "http://h/v1", "model": "m", "template": "alignmnt"})
    with pytest.raises(ConfigError, match=r"needs options\.parser"):
        structure_options(_spec(), {"base_url": "http://h/v1", "model": "m", "template": "Rate {prompt}"})
    with pytest.raises(ConfigError, match=r"http:// or https://"):
        structure_options(_spec(), {"base_url": "localhost:8000/v1", "model": "m"})


# -- videos ----------------------------------------------------------------------------------------------------

VIDEOS = np.random.default_rng(1).integers(0, 256, size=(2, 5, 8, 8, 3), dtype=np.uint8)


def _sent_frames(body: dict[str, Any]) -> list[np.ndarray]:
    parts = [part for part in body["messages"][-1]["content"] if part["type"] == "image_url"]
    return [np.asarray(Image.open(io.BytesIO(base64.b64decode(p["image_url"]["url"].split(",", 1)[1])))) for p in parts]


def test_video_frames_send_each_video_whole_in_one_request(fake_vlm: FakeVlm) -> None:
    """``video_frames = 3`` on 5-frame videos: one request per video with frames 0, 2 and 4 in time order, then
    the preamble and the template; the verdict is the video's score."""
    reward = _judge(fake_vlm, template="matches", video_frames=3)
    assert reward.scores_video
    result = reward(VIDEOS, ["a circle moving right {reply:yes}", "a square moving up {reply:no}"], [{}, {}])
    assert result.scores.tolist() == [1.0, 0.0] and result.failures == 0
    assert len(fake_vlm.bodies) == 2
    for body in fake_vlm.bodies:
        index = 0 if "circle" in body["messages"][-1]["content"][-1]["text"] else 1
        sent = _sent_frames(body)
        assert len(sent) == 3
        for got, t in zip(sent, (0, 2, 4), strict=True):
            np.testing.assert_array_equal(got, VIDEOS[index, t])
        text = body["messages"][-1]["content"][-1]["text"]
        assert text.startswith("The 3 images above are frames of one generated video") and "Does this image" in text


def test_more_frames_asked_than_a_video_has_sends_them_all(fake_vlm: FakeVlm) -> None:
    reward = _judge(fake_vlm, template="matches", video_frames=16)
    reward(VIDEOS[:1], ["{reply:yes}"], [{}])
    (body,) = fake_vlm.bodies
    assert len(_sent_frames(body)) == 5


def test_by_default_the_core_judges_each_frame_and_aggregates(fake_vlm: FakeVlm) -> None:
    """``video_frames = 0``: an image reward, so the run's reward wrapper sends every frame alone (5 requests a
    video) and the section's aggregate (the default mean) makes the video's score."""
    spec = _spec()
    options = structure_options(spec, {"base_url": fake_vlm.url, "model": "judge", "template": "matches", **FAST})
    section = ResolvedComponent(kind="reward", name="vlm_judge", spec=spec, options=options)
    combined = CombinedReward([section], None)
    scored = combined(VIDEOS, ["{reply:yes}", "{reply:no}"], [{}, {}])
    assert len(fake_vlm.bodies) == 10 and all(len(_sent_frames(b)) == 1 for b in fake_vlm.bodies)
    assert scored.total.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="video_frames > 0"):
        _judge(fake_vlm, template="matches")(VIDEOS, ["a", "b"], [{}, {}])


@pytest.mark.parametrize("frames", [-1, 65])
def test_video_frames_out_of_range_is_a_config_error(frames: int) -> None:
    expected = rf"video_frames must be an integer between 0 and 64, got {frames}; 0 judges each frame as an image"
    with pytest.raises(ConfigError, match=rf"{expected}.*@ \$\.reward\.options\.video_frames"):
        structure_options(_spec(), {"base_url": "http://h/v1", "model": "m", "video_frames": frames})
