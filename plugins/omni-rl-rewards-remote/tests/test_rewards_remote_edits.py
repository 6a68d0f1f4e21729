"""Edit judging (issue 49): ``vlm_judge`` given the source and the result in one message ("Source image:", then
"Edited image:"), yes/no scored as P(yes) / (P(yes) + P(no)) from the answer token's top log-probs (an error
naming the fix when the server returns none), the ``http`` reward sending each sample's sources to a served
reward that reads them, and a text-only run refused by ``omni-rl check`` for any of them."""

from __future__ import annotations

import base64
import io
import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omni_rl_rewards_remote import hooks
from omni_rl_rewards_remote.checks import source_reward_check
from PIL import Image
from remote_fakes import DEFAULT_LOGPROBS, FakeVlm

from omni_rl import load_config
from omni_rl.config import structure_options
from omni_rl.config.schema import ResolvedComponent
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.rewards.combined import CombinedReward
from omni_rl.rewards.frames import call_reward, reads_conditions
from omni_rl.rewards.protocol import encode_response, read_request
from omni_rl.specs import ModelSpec
from omni_rl.testing import RewardConformance

QUICKSTART = Path(__file__).parents[3] / "docs" / "examples" / "quickstart.toml"
RNG = np.random.default_rng(5)
RESULTS = RNG.integers(0, 256, size=(3, 8, 8, 3), dtype=np.uint8)
SOURCES = [RNG.integers(0, 256, size=(10, 6, 3), dtype=np.uint8) for _ in range(2)]
CONDITIONS = [(SOURCES[0],), (SOURCES[0],), (SOURCES[1], SOURCES[0])]
FAST = {"backoff_s": 0.01, "max_backoff_s": 0.05}


def _spec(name: str) -> Any:
    (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == name]
    return spec


def _judge(fake: FakeVlm, **options: Any) -> Any:
    spec = _spec("vlm_judge")
    return spec.factory(structure_options(spec, {"base_url": fake.url, "model": "judge", **FAST, **options}), None)


def _decoded(part: dict[str, Any]) -> np.ndarray:
    assert part["type"] == "image_url"
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(part["image_url"]["url"].split(",", 1)[1]))))


def _texts(content: list[dict[str, Any]]) -> list[str]:
    return [part["text"] if part["type"] == "text" else "<image>" for part in content]


def test_the_source_then_the_result_in_one_message(fake_vlm: FakeVlm) -> None:
    plain = _judge(fake_vlm, template="matches")
    assert not reads_conditions(plain) and not hasattr(plain, "reads_conditions")  # set only when sources are sent
    judge = _judge(fake_vlm, template="matches", with_source=True)
    assert reads_conditions(judge)
    result = call_reward(judge, RESULTS, ["a blue cube {reply:yes}"] * 3, [{}] * 3, CONDITIONS)
    assert result.scores.tolist() == [1.0, 1.0, 1.0]
    bodies = sorted(fake_vlm.bodies, key=lambda body: len(body["messages"][-1]["content"]))
    one, two = bodies[0]["messages"][-1]["content"], bodies[-1]["messages"][-1]["content"]
    assert _texts(one)[:4] == ["Source image:", "<image>", "Edited image:", "<image>"]
    assert _texts(two)[:5] == ["Source images:", "<image>", "<image>", "Edited image:", "<image>"]
    assert "Does this image show the following? a blue cube" in _texts(one)[-1]
    sent = {_decoded(two[1]).tobytes(), _decoded(two[2]).tobytes()}
    np.testing.assert_array_equal(_decoded(two[1]), SOURCES[1])  # the sample's sources in their order, lossless
    np.testing.assert_array_equal(_decoded(two[2]), SOURCES[0])
    assert _decoded(two[4]).tobytes() == RESULTS[2].tobytes() and RESULTS[2].tobytes() not in sent


@pytest.mark.parametrize("preset", ["edit_instruction", "edit_consistency"])
def test_the_edit_presets_send_the_source_and_ask_yes_or_no(fake_vlm: FakeVlm, preset: str) -> None:
    judge = _judge(fake_vlm, template=preset)
    assert reads_conditions(judge)
    result = call_reward(judge, RESULTS[:1], ["make the cube blue {reply:No.}"], [{}], CONDITIONS[:1])
    assert result.scores.tolist() == [0.0] and result.failures == 0
    (body,) = fake_vlm.bodies
    texts = _texts(body["messages"][-1]["content"])
    assert texts[:4] == ["Source image:", "<image>", "Edited image:", "<image>"]
    assert "Instruction: make the cube blue" in texts[-1] and texts[-1].endswith("yes or no.")


def _p_yes(pairs: str) -> float:
    probabilities = {token: math.exp(float(lp)) for token, _, lp in (p.rpartition("=") for p in pairs.split(";"))}
    yes = sum(p for token, p in probabilities.items() if token.strip().lower() == "yes")
    no = sum(p for token, p in probabilities.items() if token.strip().lower() == "no")
    return yes / (yes + no)


@pytest.mark.parametrize(
    ("directive", "expected"),
    [
        ("", _p_yes(DEFAULT_LOGPROBS)),  # "Yes" and " yes" summed against "No"
        ("{logprobs: YES=-0.5;no=-0.5;Maybe=-0.1}", 0.5),
        ("{logprobs:No=-0.01;Yes=-6}", math.exp(-6) / (math.exp(-6) + math.exp(-0.01))),
    ],
)
def test_yes_prob_is_p_yes_over_p_yes_plus_p_no(fake_vlm: FakeVlm, directive: str, expected: float) -> None:
    judge = _judge(fake_vlm, template="edit_consistency", score="yes_prob", max_tokens=256)
    result = call_reward(judge, RESULTS[:1], [f"make it blue {directive}"], [{}], CONDITIONS[:1])
    assert result.scores.tolist() == pytest.approx([expected], abs=1e-12) and result.failures == 0
    (body,) = fake_vlm.bodies
    assert body["logprobs"] is True and body["top_logprobs"] == 20 and body["max_tokens"] == 1


def test_an_answer_without_yes_or_no_is_a_counted_failure(fake_vlm: FakeVlm) -> None:
    judge = _judge(fake_vlm, template="matches", score="yes_prob")
    result = judge(RESULTS[:2], ["a cube {logprobs:Maybe=-0.1;Perhaps=-2}", "a cube"], [{}] * 2)
    assert result.scores[0] == 0.0 and result.failures == 1 and 0 < result.scores[1] < 1


def test_a_server_without_logprobs_is_an_error_naming_the_fix_not_a_zero(fake_vlm: FakeVlm) -> None:
    judge = _judge(fake_vlm, template="matches", score="yes_prob")
    with pytest.raises(RuntimeFailure) as caught:
        judge(RESULTS[:1], ["a cube {nologprobs}"], [{}])
    assert f"the server at {fake_vlm.url}/chat/completions returned none" in caught.value.message
    assert 'options.score = "parse"' in caught.value.message


def test_a_video_is_labelled_after_its_source(fake_vlm: FakeVlm) -> None:
    judge = _judge(fake_vlm, template="matches", with_source=True, video_frames=2)
    clips = RNG.integers(0, 256, size=(1, 3, 8, 8, 3), dtype=np.uint8)
    judge(clips, ["a cube rolling"], [{}], conditions=CONDITIONS[:1])
    (body,) = fake_vlm.bodies
    texts = _texts(body["messages"][-1]["content"])
    assert texts[:5] == ["Source image:", "<image>", "Generated video:", "<image>", "<image>"]
    assert texts[-1].startswith('The 2 images after "Generated video:" are frames of one video generated from')


def test_sources_missing_or_the_wrong_scoring_are_refused_before_any_call(fake_vlm: FakeVlm) -> None:
    judge = _judge(fake_vlm, template="edit_instruction")
    with pytest.raises(ValueError, match=r"sample 1 has none \(a text-only batch\).*`image` or `images` field"):
        judge(RESULTS[:2], ["a", "b"], [{}] * 2, conditions=[(SOURCES[0],), ()])
    with pytest.raises(ValueError, match="sample 0 has none"):
        judge(RESULTS[:2], ["a", "b"], [{}] * 2)
    assert fake_vlm.bodies == []
    with pytest.raises(ConfigError, match=r'score = "yes_prob" scores a yes/no answer, but the preset \'alignment\''):
        structure_options(_spec("vlm_judge"), {"base_url": "http://x/v1", "model": "m", "score": "yes_prob"})


def test_a_run_hands_the_judge_its_sources(fake_vlm: FakeVlm) -> None:
    spec = _spec("vlm_judge")
    options = structure_options(spec, {"base_url": fake_vlm.url, "model": "m", "template": "edit_consistency"})
    section = ResolvedComponent(kind="reward", name="vlm_judge", spec=spec, options=options)
    scored = CombinedReward([section], None)(RESULTS, ["a {reply:yes}"] * 3, [{}] * 3, conditions=CONDITIONS)
    assert scored.total.tolist() == [1.0] * 3
    assert sorted(len(body["messages"][-1]["content"]) for body in fake_vlm.bodies) == [5, 5, 6]


def _edit_model() -> ResolvedComponent:
    spec = ModelSpec(name="edit_model", factory=lambda config, ctx: None, condition_images=(1, 1))
    return ResolvedComponent(kind="model", name="edit_model", spec=spec, options=None, path="$.model")


@pytest.mark.parametrize(
    ("name", "options", "option"),
    [
        ("vlm_judge", '{base_url = "http://127.0.0.1:9/v1", model = "m", template = "edit_consistency"}', "template"),
        ("vlm_judge", '{base_url = "http://127.0.0.1:9/v1", model = "m", with_source = true}', "with_source"),
        ("http", '{url = "http://127.0.0.1:9/edit", send_conditions = true}', "send_conditions"),
    ],
)
def test_a_text_only_run_is_refused_before_it_starts(name: str, options: str, option: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(QUICKSTART, [f'reward.0.name="{name}"', f"reward.0.options={options}"])
    text = str(caught.value)
    assert "the 'qwen_image' model takes no condition images" in text
    assert text.count(f"@ $.reward[0].options.{option}") == 1
    spec = _spec(name)
    section = ResolvedComponent(
        kind="reward", name=name, spec=spec, options=structure_options(spec, _toml(options)), path="$.reward[0]"
    )
    assert source_reward_check({"model": _edit_model(), "reward[0]": section}) == []  # an editing model takes it


def _toml(table: str) -> dict[str, Any]:
    from omni_rl.config import parse_toml_text

    return parse_toml_text(f"x = {table}")["x"]


@pytest.fixture
def edit_server() -> Iterator[dict[str, Any]]:
    """A reward server of the protocol whose reward reads the sources: each sample scores its first source's mean
    brightness (so the test sees which source reached which sample); it records what each request held."""
    record: dict[str, Any] = {"requests": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request = read_request(body)
            record["requests"].append(body)
            scores = [float(c[0].mean()) / 255.0 if c else -1.0 for c in request.conditions] or [-2.0] * len(
                request.prompts
            )
            data = json.dumps(encode_response(np.array(scores))).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    record["url"] = f"http://127.0.0.1:{httpd.server_port}/edit"
    yield record
    httpd.shutdown()
    httpd.server_close()


def _http(url: str, **options: Any) -> Any:
    spec = _spec("http")
    return spec.factory(structure_options(spec, {"url": url, **options}), None)


@pytest.mark.parametrize(("encoding", "batch_size"), [("png", 0), ("raw", 2)])
def test_http_sends_each_samples_sources_with_it(edit_server: dict[str, Any], encoding: str, batch_size: int) -> None:
    reward = _http(edit_server["url"], send_conditions=True, image_encoding=encoding, batch_size=batch_size)
    assert reads_conditions(reward)
    result = call_reward(reward, RESULTS, ["p"] * 3, [{}] * 3, CONDITIONS)
    expected = [SOURCES[0].mean() / 255.0, SOURCES[0].mean() / 255.0, SOURCES[1].mean() / 255.0]
    np.testing.assert_allclose(result.scores, expected)  # lossless PNG, aligned across chunks
    if batch_size == 0:
        (body,) = edit_server["requests"]
        assert len(body["conditions"]["data"]) == 2 and body["conditions"]["samples"] == [[0], [0], [1, 0]]


def test_http_sends_no_sources_unless_asked(edit_server: dict[str, Any]) -> None:
    reward = _http(edit_server["url"])
    assert not reads_conditions(reward)
    assert call_reward(reward, RESULTS, ["p"] * 3, [{}] * 3, CONDITIONS).scores.tolist() == [-2.0] * 3
    assert "conditions" not in edit_server["requests"][0]


class TestEditJudgeConformance(RewardConformance):
    def test_config_structures_from_empty_options_when_all_fields_have_defaults(self, spec: Any) -> None:
        """Every field has a default, but one of base_url and server is required (a rule attrs cannot state):
        empty options are refused, naming both."""
        from omni_rl.config import structure_options
        from omni_rl.errors import ConfigError

        with pytest.raises(ConfigError, match="set base_url"):
            structure_options(spec, {})

    @pytest.fixture
    def spec(self) -> Any:
        return _spec("vlm_judge")

    @pytest.fixture
    def options(self, fake_vlm: FakeVlm) -> dict[str, Any]:
        return {"base_url": fake_vlm.url, "model": "judge", "template": "edit_consistency", "score": "yes_prob"}


class TestHttpWithSourcesConformance(RewardConformance):
    @pytest.fixture
    def spec(self) -> Any:
        return _spec("http")

    @pytest.fixture
    def options(self, edit_server: dict[str, Any]) -> dict[str, Any]:
        return {"url": edit_server["url"], "send_conditions": True}
