"""A local stand-in for an OpenAI-compatible VLM server (vLLM / SGLang ``/v1/chat/completions``).

What it does with a call is written in the generation prompt, which reaches it inside the request's text part:
``{reply:Final Score: 4}`` answers that text, ``{flaky:yes}`` fails the first call for that prompt with HTTP 503
(then answers "yes"), ``{down}`` always answers 500 (echoing the Authorization header back, as a careless server
might), ``{denied}`` answers 401, ``{sleep:yes}`` answers after ``SLEEP_S``, ``{garbage}`` answers a non-chat JSON
object. A request asking for log-probs (``logprobs: true``) gets the first answer token's top log-probs:
``{logprobs:Yes=-0.1; no=-2.5}`` (token=logprob pairs split at ";", spaces kept, the first the sampled token),
``DEFAULT_LOGPROBS`` without a directive; ``{nologprobs}`` answers "Yes" without any, as a server that does not
serve them. The directive is read from the message's last text part (the template: an edit's message has its
"Source image:" labels before it).
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SLEEP_S = 1.5
DEFAULT_LOGPROBS = "Yes=-0.2;No=-1.8; yes=-4.0;Maybe=-5.0"
_DIRECTIVE = re.compile(r"\{(\w+)(?::([^}]*))?\}")


class FakeVlm:
    """The server's record of what it was sent."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.bodies: list[dict[str, Any]] = []
        self.authorization: list[str] = []
        self.lock = threading.Lock()
        self.url = ""

    def answer(self, body: dict[str, Any], authorization: str) -> tuple[int, dict[str, Any]]:
        text = [part["text"] for part in body["messages"][-1]["content"] if part["type"] == "text"][-1]
        found = _DIRECTIVE.search(text)
        action, argument = (found.group(1), found.group(2) or "") if found else ("reply", "Final Score: 5")
        with self.lock:
            self.calls[text] += 1
            self.bodies.append(body)
            self.authorization.append(authorization)
            calls = self.calls[text]
        if action == "flaky" and calls == 1:
            return 503, {"error": "model loading"}
        if action == "down":
            return 500, {"error": f"internal error handling headers {{'Authorization': '{authorization}'}}"}
        if action == "denied":
            return 401, {"error": "invalid api key"}
        if action == "sleep":
            time.sleep(SLEEP_S)
        if action == "garbage":
            return 200, {"unexpected": True}
        if action == "nologprobs":
            return 200, {"id": "x", "object": "chat.completion", "choices": [{"message": {"content": "Yes"}}]}
        if body.get("logprobs"):
            return 200, _logprobs_reply(argument if action == "logprobs" else DEFAULT_LOGPROBS)
        reply = argument if action == "reply" or argument else "Final Score: 5"
        return 200, {"id": "x", "object": "chat.completion", "choices": [{"message": {"content": reply}}]}


def _logprobs_reply(pairs: str) -> dict[str, Any]:
    """A chat completion of one token with its top log-probs, as vLLM and OpenAI return them."""
    alternatives = []
    for pair in pairs.split(";"):
        token, _, logprob = pair.rpartition("=")
        alternatives.append({"token": token, "logprob": float(logprob), "bytes": None})
    first = alternatives[0]
    logprobs = {"content": [{**first, "top_logprobs": alternatives}]}
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"message": {"content": first["token"]}, "logprobs": logprobs}],
    }


@contextlib.contextmanager
def running_fake_vlm() -> Iterator[FakeVlm]:
    """A running fake server; ``fake_vlm.url`` is its API root (``.../v1``)."""
    state = FakeVlm()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            if self.path != "/v1/chat/completions":
                status, reply = 404, {"error": f"no route {self.path}"}
            else:
                status, reply = state.answer(body, self.headers.get("Authorization", ""))
            data = json.dumps(reply).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client timed out and left
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_port}/v1"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
