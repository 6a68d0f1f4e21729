"""A key with a final newline (issue 48, N1): ``echo sk-... | base64`` into a Kubernetes Secret writes one, and
before the fix ``http.client`` refused the header and its ``ValueError`` (``Invalid header value b'Bearer sk-...\\n'``)
reached the console whole, past the redaction (``repr`` wrote the newline as ``\\n``, so the exact key no longer
matched). Now the key is read without surrounding whitespace, a key with a control character or whitespace inside
it is refused by the variable's name when the reward is built (and by ``omni-rl check``), and any error text is
scrubbed of every form of the key."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest
from omni_rl_rewards_remote import hooks
from omni_rl_rewards_remote.secrets import MASK, key_kept_out, redact
from omni_rl_rewards_remote.transport import RemoteCallError, Retry, post_json

from omni_rl.config import structure_options
from omni_rl.config.schema import ResolvedComponent
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.rewards.combined import CombinedReward
from omni_rl.train.preflight import env_var_problems

SECRET = "sk-Zq8vXw3Lk9PtR2"
KEY_ENV = "OMNI_RL_TEST_KEY_HYGIENE"
IMAGES = np.zeros((2, 8, 8, 3), dtype=np.uint8)
NO_RETRY = Retry(timeout_s=5.0, max_retries=0, backoff_s=0.0, max_backoff_s=0.0)


def leaked(text: str) -> bool:
    """Whether any 4 consecutive characters of the key's secret part are in ``text``."""
    part = SECRET.removeprefix("sk-")
    return any(part[i : i + 4] in text for i in range(len(part) - 3))


@pytest.fixture(scope="module")
def echo() -> Iterator[dict[str, Any]]:
    """A server that answers 403 and echoes the Authorization header it got (``/403``), or 200 with chat and
    protocol replies (``/ok``); ``record["authorization"]`` holds every header it received."""
    record: dict[str, Any] = {"authorization": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            authorization = self.headers.get("Authorization", "")
            record["authorization"].append(authorization)
            if self.path.startswith("/403"):
                status, data = 403, json.dumps({"error": f"unauthorized: {authorization}"}).encode()
            else:
                reply = {"scores": [0.5, 0.5], "choices": [{"message": {"content": "4"}}]}
                status, data = 200, json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    record["url"] = f"http://127.0.0.1:{httpd.server_port}"
    yield record
    httpd.shutdown()
    httpd.server_close()


def _spec(name: str) -> Any:
    (spec,) = [s for s in hooks.omni_rl_reward_models() if s.name == name]
    return spec


def _section(name: str, on_error: str = "raise", **options: Any) -> ResolvedComponent:
    spec = _spec(name)
    structured = structure_options(spec, {"api_key_env": KEY_ENV, "max_retries": 0, **options})
    return ResolvedComponent(kind="reward", name=name, spec=spec, options=structured, on_error=on_error)


def _options(name: str, url: str) -> dict[str, Any]:
    return {"url": f"{url}/http"} if name == "http" else {"base_url": f"{url}/v1", "model": "judge"}


@pytest.mark.parametrize("name", ["http", "vlm_judge"])
@pytest.mark.parametrize("ending", ["\n", "\r\n", " \n"])
def test_a_key_ending_in_a_newline_is_sent_without_it_and_reaches_no_output(
    echo: dict[str, Any],
    name: str,
    ending: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET + ending)
    caplog.set_level(logging.DEBUG)
    base = echo["url"]
    # a server that takes the key: it gets the key alone, and the batch is scored
    scored = CombinedReward([_section(name, **_options(name, f"{base}/ok"))], None)(IMAGES, ["a", "b"], [{}, {}])
    assert scored.failures == {} and echo["authorization"][-1] == f"Bearer {SECRET}"
    # a server that refuses it and echoes it back: the failure names the server, with the key masked
    refused = _options(name, f"{base}/403")
    if name == "http":
        with pytest.raises(RuntimeFailure) as caught:
            CombinedReward([_section(name, **refused)], None)(IMAGES, ["a", "b"], [{}, {}])
        text = str(caught.value)
        assert "HTTP 403" in text and f"Bearer {MASK}" in text
    tolerant = CombinedReward([_section(name, on_error="zero", **refused)], None)
    result = tolerant(IMAGES, ["a", "b"], [{}, {}])
    assert result.total.tolist() == [0.0, 0.0]
    out, err = capsys.readouterr()
    logged = "\n".join(record.getMessage() for record in caplog.records)
    errors = " ".join(result.errors.values())
    for text in (out, err, logged, errors):
        assert not leaked(text), text


@pytest.mark.parametrize("name", ["http", "vlm_judge"])
@pytest.mark.parametrize("value", [f"{SECRET}\r\nsk-second", f"{SECRET[:8]}\n{SECRET[8:]}", f"{SECRET} x"])
def test_a_key_with_a_line_break_inside_is_refused_by_name_when_built_and_by_check(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, value)
    section = _section(name, **_options(name, "http://127.0.0.1:9"))
    section = ResolvedComponent(
        kind="reward", name=name, spec=section.spec, options=section.options, path="$.reward[0]"
    )
    with pytest.raises(ConfigError) as caught:
        section.build(None)
    assert KEY_ENV in caught.value.message and "control character" in caught.value.message
    assert not leaked(str(caught.value))
    # omni-rl check (preflight) reads the same options: refused there first, by the variable's name
    (problem,) = env_var_problems(section)
    assert problem.endswith("@ $.reward[0].options.api_key_env") and KEY_ENV in problem and not leaked(problem)
    monkeypatch.setenv(KEY_ENV, SECRET + "\n")
    assert env_var_problems(section) == []  # a final newline alone is dropped, as the reward drops it


def test_a_header_value_http_client_refuses_is_a_redacted_call_error(echo: dict[str, Any]) -> None:
    """The transport's last line: a caller that sends a bad header value gets a RemoteCallError (not the raw
    ValueError, which quotes the header) with the key masked, whether it passes the raw or the stripped key."""
    for secret in (SECRET + "\n", SECRET):
        with pytest.raises(RemoteCallError) as caught:
            post_json(
                f"{echo['url']}/ok",
                {},
                retry=NO_RETRY,
                headers={"Authorization": f"Bearer {SECRET}\n"},
                secret=secret,
            )
        assert "ValueError" in str(caught.value) and not leaked(str(caught.value)), str(caught.value)
        assert not caught.value.retryable


def test_every_written_form_of_the_key_is_masked() -> None:
    raw = SECRET + "\n"
    for text in (f"b'Bearer {raw!r}'", f"Bearer {raw}", repr(raw.encode()), f"[{SECRET}]"):
        assert not leaked(redact(text, raw)), text
        assert not leaked(redact(text, SECRET)), text


def test_an_unexpected_error_quoting_the_key_is_rewritten_and_others_pass_through() -> None:
    with pytest.raises(RuntimeFailure) as caught, key_kept_out(SECRET, "http"):
        raise ValueError(f"Invalid header value b'Bearer {SECRET}\\n'")
    assert caught.value.__suppress_context__ and not leaked(str(caught.value))
    assert str(caught.value).startswith("the http reward failed: ValueError: Invalid header value")
    with pytest.raises(KeyError), key_kept_out(SECRET, "http"):
        raise KeyError("nothing secret")
