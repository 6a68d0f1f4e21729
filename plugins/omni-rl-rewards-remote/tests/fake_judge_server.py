"""A stand-in for vLLM's OpenAI-compatible server, run as its own process, for the managed-server tests.

``python fake_judge_server.py --host H --port P --model M [--start-delay S] [--fail-start MSG] [--die-after N]
[--die-once FILE] [--grandchild]``: it checks the bearer key against ``$OMNI_RL_SERVER_API_KEY`` (as vLLM checks
``$VLLM_API_KEY``), serves ``GET /v1/models`` and ``POST /v1/chat/completions``, and answers "Yes" or "No" with
top log-probs that are a function of the request's image bytes (deterministic across restarts, different per
image). ``--fail-start`` prints a traceback ending in ``MSG`` and exits 1, as a server that cannot load its model;
``--die-after N`` exits abruptly after N completions (with ``--die-once FILE``: only when FILE does not exist yet,
which it then creates, so the restarted server lives); ``--grandchild`` starts a sleeping child, to check that a
stop takes the whole process group. Standard library only: it runs under any Python.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def yes_logprob(body: dict) -> float:
    """log P(yes) of the first answer token: a function of the images in the request (and nothing else)."""
    images = [
        part["image_url"]["url"]
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for part in message["content"]
        if part.get("type") == "image_url"
    ]
    digest = hashlib.sha256("".join(images).encode()).digest()
    p_yes = 0.05 + 0.9 * (digest[0] / 255.0)
    return math.log(p_yes)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--model", default="judge")
    parser.add_argument("--start-delay", type=float, default=0.0)
    parser.add_argument("--fail-start", default="")
    parser.add_argument("--die-after", type=int, default=0)
    parser.add_argument("--die-once", default="")
    parser.add_argument("--grandchild", action="store_true")
    args = parser.parse_args()
    print(f"fake judge server starting for {args.model} on {args.host}:{args.port}", flush=True)
    if args.grandchild:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    time.sleep(args.start_delay)
    if args.fail_start:
        print("Traceback (most recent call last):", flush=True)
        print('  File "server.py", line 1, in load_model', flush=True)
        print(f"OSError: {args.fail_start}", flush=True)
        return 1
    key = os.environ.get("OMNI_RL_SERVER_API_KEY", "")
    die = args.die_after and not (args.die_once and Path(args.die_once).exists())
    served = {"n": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _reply(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorized(self) -> bool:
            if key and self.headers.get("Authorization") != f"Bearer {key}":
                self._reply(401, {"error": "invalid api key"})
                return False
            return True

        def do_GET(self) -> None:
            if self.path == "/health":
                return self._reply(200, {})
            if not self._authorized():
                return None
            if self.path == "/v1/models":
                return self._reply(200, {"object": "list", "data": [{"id": args.model, "object": "model"}]})
            return self._reply(404, {"error": "not found"})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            if not self._authorized():
                return None
            if self.path != "/v1/chat/completions":
                return self._reply(404, {"error": "not found"})
            if body.get("model") != args.model:
                return self._reply(404, {"error": f"The model `{body.get('model')}` does not exist."})
            yes = yes_logprob(body)
            no = math.log1p(-math.exp(yes))
            answer = "Yes" if yes >= no else "No"
            choice = {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "length"}
            if body.get("logprobs"):
                top = sorted([("Yes", yes), ("No", no)], key=lambda t: -t[1])
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": answer,
                            "logprob": max(yes, no),
                            "top_logprobs": [{"token": t, "logprob": lp} for t, lp in top],
                        }
                    ]
                }
            self._reply(200, {"object": "chat.completion", "model": args.model, "choices": [choice]})
            with lock:
                served["n"] += 1
                if die and served["n"] >= args.die_after:
                    if args.die_once:
                        Path(args.die_once).touch()
                    print("fake judge server: dying as asked (--die-after)", flush=True)
                    os._exit(9)

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print("fake judge server ready", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
