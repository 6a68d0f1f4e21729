"""The ``http`` reward against a minimal server of the reward protocol (no Ray here; tests/integration serves a
real reward with ``omni-rl serve-reward``): scores come back as the server computed them, in chunks, with PNG or
raw images, and a server that is away is named with its URL."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from omni_rl_rewards_remote import hooks

from omni_rl.batch import RewardResult
from omni_rl.config import structure_options
from omni_rl.config.schema import ResolvedComponent
from omni_rl.errors import RuntimeFailure
from omni_rl.rewards.combined import CombinedReward
from omni_rl.rewards.protocol import decode_request, encode_response
from omni_rl.testing import RewardConformance

IMAGES = np.random.default_rng(1).integers(0, 256, size=(5, 6, 4, 3), dtype=np.uint8)
PROMPTS = [f"prompt {i}" for i in range(5)]


def brightness(images: np.ndarray, prompts: list[str], metadata: list[dict[str, Any]]) -> RewardResult:
    """The served reward: mean brightness, plus the red channel and a metadata echo as sub-scores."""
    pixels = images.astype(np.float64) / 255.0  # images (N, H, W, 3) or videos (N, F, H, W, 3)
    echo = np.array([float(m.get("k", -1)) for m in metadata])
    n = len(pixels)
    return RewardResult(
        scores=pixels.reshape(n, -1).mean(axis=1),
        details={"red": pixels[..., 0].reshape(n, -1).mean(axis=1), "k": echo},
    )


@pytest.fixture
def server() -> Iterator[dict[str, Any]]:
    record: dict[str, Any] = {"sizes": [], "encodings": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            images, prompts, metadata = decode_request(body)
            record["sizes"].append(len(prompts))
            record.setdefault("shapes", []).append(images.shape)
            record["encodings"].append(body["images"]["encoding"])
            data = json.dumps(encode_response(brightness(images, prompts, metadata))).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    record["url"] = f"http://127.0.0.1:{httpd.server_port}/brightness"
    yield record
    httpd.shutdown()
    httpd.server_close()


def _spec() -> Any:
    (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == "http"]
    return spec


def _reward(url: str, **options: Any) -> Any:
    spec = _spec()
    return spec.factory(structure_options(spec, {"url": url, **options}), None)


@pytest.mark.parametrize(("encoding", "batch_size", "sizes"), [("png", 0, [5]), ("raw", 2, [2, 2, 1])])
def test_scores_are_the_servers(server: dict[str, Any], encoding: str, batch_size: int, sizes: list[int]) -> None:
    metadata = [{"k": i} for i in range(5)]
    result = _reward(server["url"], image_encoding=encoding, batch_size=batch_size)(IMAGES, PROMPTS, metadata)
    expected = brightness(IMAGES, PROMPTS, metadata)
    np.testing.assert_array_equal(result.scores, expected.scores)  # lossless both ways: identical, not close
    np.testing.assert_array_equal(result.details["red"], expected.details["red"])
    np.testing.assert_array_equal(result.details["k"], np.arange(5.0))  # metadata travels, in order
    assert sorted(server["sizes"]) == sorted(sizes) and set(server["encodings"]) == {encoding}


VIDEOS = np.random.default_rng(2).integers(0, 256, size=(2, 3, 6, 4, 3), dtype=np.uint8)


@pytest.mark.parametrize("encoding", ["png", "raw"])
def test_scores_video_sends_whole_videos(server: dict[str, Any], encoding: str) -> None:
    reward = _reward(server["url"], image_encoding=encoding, scores_video=True)
    assert reward.scores_video  # the core then hands it videos, not frames
    result = reward(VIDEOS, PROMPTS[:2], [{}, {}])
    assert server["shapes"] == [(2, 3, 6, 4, 3)]
    np.testing.assert_array_equal(result.scores, brightness(VIDEOS, PROMPTS[:2], [{}, {}]).scores)


def test_a_video_without_frames_is_refused_before_any_request(server: dict[str, Any]) -> None:
    reward = _reward(server["url"], scores_video=True)
    with pytest.raises(ValueError, match="at least one frame"):
        reward(VIDEOS[:, :0], PROMPTS[:2], [{}, {}])
    assert server["sizes"] == []


def test_by_default_a_run_sends_each_frame_as_an_image(server: dict[str, Any]) -> None:
    spec = _spec()
    section = ResolvedComponent(
        kind="reward", name="http", spec=spec, options=structure_options(spec, {"url": server["url"]})
    )
    scored = CombinedReward([section], None)(VIDEOS, PROMPTS[:2], [{}, {}])
    assert server["shapes"] == [(6, 6, 4, 3)]  # 2 videos x 3 frames, as images
    frame_means = brightness(VIDEOS.reshape(6, 6, 4, 3), ["p"] * 6, [{}] * 6).scores.reshape(2, 3).mean(axis=1)
    np.testing.assert_allclose(scored.total, frame_means)


def test_a_server_that_is_away_is_named_by_url() -> None:
    url = "http://127.0.0.1:9/nothing-listens-here"
    reward = _reward(url, max_retries=1, backoff_s=0.01)
    with pytest.raises(RuntimeFailure) as caught:
        reward(IMAGES, PROMPTS, [{}] * 5)
    assert f"the reward server at {url} did not score the batch" in caught.value.message
    assert "after 2 attempts" in caught.value.message and "omni-rl serve-reward" in (caught.value.hint or "")


class TestHttpConformance(RewardConformance):
    @pytest.fixture
    def spec(self) -> Any:
        return _spec()

    @pytest.fixture
    def options(self, server: dict[str, Any]) -> dict[str, Any]:
        return {"url": server["url"]}


class TestVlmJudgeConformance(RewardConformance):
    def test_config_structures_from_empty_options_when_all_fields_have_defaults(self, spec: Any) -> None:
        """Every field has a default, but one of base_url and server is required (a rule attrs cannot state):
        empty options are refused, naming both."""
        from omni_rl.config import structure_options
        from omni_rl.errors import ConfigError

        with pytest.raises(ConfigError, match="set base_url"):
            structure_options(spec, {})

    @pytest.fixture
    def spec(self) -> Any:
        (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == "vlm_judge"]
        return spec

    @pytest.fixture
    def options(self, fake_vlm: Any) -> dict[str, Any]:
        return {"base_url": fake_vlm.url, "model": "judge", "template": "matches"}
