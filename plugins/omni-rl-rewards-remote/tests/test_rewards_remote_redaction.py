"""The API key never leaks through a cut error text (issue 33, item 8): a hostile server echoes the bearer token at
every offset around the excerpt limits of ``post_json`` (300), ``vlm_judge``'s non-chat reply (200) and its
parsers (120), and ``http``'s error; no four consecutive characters of the key may reach the message. Before the
fix the key was redacted after the cut, so a key straddling the cut kept every character up to it."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from omni_rl_rewards_remote import hooks
from omni_rl_rewards_remote.parsers import parse_yes_no
from omni_rl_rewards_remote.secrets import MASK, redacted_excerpt
from omni_rl_rewards_remote.transport import RemoteCallError, Retry, post_json

from omni_rl.config import structure_options
from omni_rl.errors import RuntimeFailure

KEY = "sk-Q7xV9mLp2RtY8wZ"
KEY_ENV = "OMNI_RL_TEST_REDACTION_KEY"
IMAGES = np.zeros((1, 8, 8, 3), dtype=np.uint8)
NO_RETRY = Retry(timeout_s=5.0, max_retries=0, backoff_s=0.0, max_backoff_s=0.0)


def leaked(text: str, key: str = KEY, run: int = 4) -> list[str]:
    """Every piece of ``run`` consecutive characters of ``key`` found in ``text``."""
    return [key[i : i + run] for i in range(len(key) - run + 1) if key[i : i + run] in text]


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    """A server that echoes the Authorization header's token after ``pad`` characters of padding, in the way the
    path says: ``/<status>/<pad>/<shape>/...`` with shape ``body`` (the whole reply body), ``field`` (a JSON object
    that is not a chat completion) or ``content`` (a chat completion whose message is the padding and the key)."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            token = self.headers.get("Authorization", "").removeprefix("Bearer ")
            _, status, pad, shape, *_ = self.path.split("/")
            echo = "x" * int(pad) + token + " and more text after it"
            if shape == "field":
                data = json.dumps({"detail": echo}).encode()
            elif shape == "content":
                data = json.dumps({"choices": [{"message": {"content": echo}}]}).encode()
            else:
                data = echo.encode()
            self.send_response(int(status))
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_port}"
    httpd.shutdown()
    httpd.server_close()


@pytest.mark.parametrize("pad", range(280, 302))
def test_post_json_error_bodies_never_show_part_of_the_key(hostile: str, pad: int) -> None:
    with pytest.raises(RemoteCallError) as caught:
        post_json(
            f"{hostile}/400/{pad}/body", {}, retry=NO_RETRY, headers={"Authorization": f"Bearer {KEY}"}, secret=KEY
        )
    assert leaked(str(caught.value)) == []


@pytest.mark.parametrize("pad", range(280, 302))
def test_a_reply_that_is_not_json_never_shows_part_of_the_key(hostile: str, pad: int) -> None:
    with pytest.raises(RemoteCallError) as caught:
        post_json(
            f"{hostile}/200/{pad}/body", {}, retry=NO_RETRY, headers={"Authorization": f"Bearer {KEY}"}, secret=KEY
        )
    assert "not JSON" in str(caught.value) and leaked(str(caught.value)) == []


def _reward(name: str, monkeypatch: pytest.MonkeyPatch, **options: Any) -> Any:
    monkeypatch.setenv(KEY_ENV, KEY)
    (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == name]
    return spec.factory(structure_options(spec, {"api_key_env": KEY_ENV, "max_retries": 0, **options}), None)


@pytest.mark.parametrize(("shape", "pads"), [("field", range(160, 200)), ("content", range(95, 125))])
def test_vlm_judge_failures_never_show_part_of_the_key(
    hostile: str, shape: str, pads: range, monkeypatch: pytest.MonkeyPatch
) -> None:
    for pad in pads:
        judge = _reward("vlm_judge", monkeypatch, base_url=f"{hostile}/200/{pad}/{shape}/v1", model="m")
        verdict = judge._judge(IMAGES[0], "a cat", parse_yes_no, KEY)  # quotes 120 characters of the reply
        assert verdict.score == 0.0 and verdict.error
        assert leaked(verdict.error) == [], (pad, verdict.error)


@pytest.mark.parametrize("pad", range(280, 302))
def test_the_http_rewards_error_never_shows_part_of_the_key(
    hostile: str, pad: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    reward = _reward("http", monkeypatch, url=f"{hostile}/400/{pad}/body")
    with pytest.raises(RuntimeFailure) as caught:
        reward(IMAGES, ["a cat"], [{}])
    assert leaked(str(caught.value)) == []


def test_redacted_excerpt_redacts_first_then_cuts_then_masks_the_prefix_at_the_cut() -> None:
    text = "x" * 10 + KEY + " tail"
    # the whole key is found before the cut, so nothing of it survives wherever the cut falls
    for limit in range(1, len(text) + 2):
        assert leaked(redacted_excerpt(text, KEY, limit), run=2) == []
    # a key that was already cut (a partial key at the end of the text) is masked at our cut too
    partial = "x" * 10 + KEY[:9] + "ignored"
    assert redacted_excerpt(partial, KEY, 19) == "x" * 10 + MASK + "..."
    # and at the end of an uncut text from 4 characters on, without eating an ordinary last letter
    assert redacted_excerpt("reply: " + KEY[:6], KEY, 100) == "reply: " + MASK
    assert redacted_excerpt("errors", KEY, 100) == "errors"
    assert redacted_excerpt("no key here", "", 5) == "no ke..."
