"""The ``http`` reward against a token-protected reward server (issue 33, item 10): ``options.api_key_env`` names
the variable whose token it sends as ``Authorization: Bearer``; without it the server answers a JSON 401, which
the reward does not retry (a client error never gets better) and reports by URL, without the token. The server
is the replica's own request handling (omni_rl.serving.limits.answer) behind a standard-library HTTP server."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from omni_rl_rewards_remote import hooks

from omni_rl.config import structure_options
from omni_rl.errors import RuntimeFailure
from omni_rl.rewards.protocol import PixelLimits, encode_response
from omni_rl.serving.limits import ServeLimits, answer
from omni_rl.serving.token import TokenDigest

TOKEN = "serve-token-0123456789"
TOKEN_ENV = "OMNI_RL_TEST_SERVE_TOKEN"
IMAGES = np.random.default_rng(2).integers(0, 256, size=(3, 16, 16, 3), dtype=np.uint8)
LIMITS = ServeLimits(
    max_body_bytes=2**20,
    pixels=PixelLimits(per_image=32 * 32, per_request=4 * 32 * 32),
    token=TokenDigest.of(TOKEN),  # what a replica holds: the token's salted digest
)


@pytest.fixture(scope="module")
def server() -> Iterator[dict[str, Any]]:
    record: dict[str, Any] = {"requests": 0}

    async def score(
        images: np.ndarray, prompts: list[str], metadata: list[dict[str, Any]], conditions: list[Any]
    ) -> dict[str, Any]:
        return encode_response(images.astype(np.float64).mean(axis=(1, 2, 3)) / 255.0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            record["requests"] += 1
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))

            async def chunks() -> AsyncIterator[bytes]:
                yield body

            headers = {key.lower(): value for key, value in self.headers.items()}
            status, document = asyncio.run(answer("POST", headers, chunks(), LIMITS, {"reward": "b"}, score))
            data = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    record["url"] = f"http://127.0.0.1:{httpd.server_port}/b"
    yield record
    httpd.shutdown()
    httpd.server_close()


def _reward(url: str, **options: Any) -> Any:
    (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == "http"]
    return spec.factory(structure_options(spec, {"url": url, "backoff_s": 0.0, **options}), None)


def test_the_token_named_by_api_key_env_is_sent(server: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    result = _reward(server["url"], api_key_env=TOKEN_ENV)(IMAGES, ["a"] * 3, [{}] * 3)
    assert result.scores.tolist() == pytest.approx((IMAGES.mean(axis=(1, 2, 3)) / 255.0).tolist())


@pytest.mark.parametrize("sent", [None, "wrong-token"])
def test_no_or_a_wrong_token_is_a_401_not_retried(
    server: dict[str, Any], sent: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    options: dict[str, Any] = {"max_retries": 3}
    if sent is not None:
        monkeypatch.setenv(TOKEN_ENV, sent)
        options["api_key_env"] = TOKEN_ENV
    before = server["requests"]
    with pytest.raises(RuntimeFailure) as caught:
        _reward(server["url"], **options)(IMAGES, ["a"] * 3, [{}] * 3)
    assert "HTTP 401" in caught.value.message and "bearer token" in caught.value.message
    assert server["requests"] - before == 1  # a client error: not retried as a server fault would be
    assert TOKEN not in str(caught.value)


def test_too_many_pixels_is_a_400_not_retried(server: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    big = np.zeros((5, 32, 32, 3), dtype=np.uint8)  # 5 images of the 4 a request may hold
    before = server["requests"]
    with pytest.raises(RuntimeFailure, match=r"HTTP 400 .*limit per request"):
        _reward(server["url"], api_key_env=TOKEN_ENV, max_retries=3)(big, ["a"] * 5, [{}] * 5)
    assert server["requests"] - before == 1
