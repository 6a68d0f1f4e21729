"""A real ``serve-reward`` replica on Ray Serve with ``[server] token_env`` and small pixel limits (issue 33, item
10): a request without the token is a JSON 401, a 144-Mpixel PNG bomb and deep JSON are JSON 400s (not Starlette's
plain-text 500), and the ``http`` reward with ``api_key_env`` naming the same variable scores through it."""

from __future__ import annotations

import base64
import json
import socket
import struct
import urllib.error
import urllib.request
import zlib
from pathlib import Path

import numpy as np
import pytest

from omni_rl import get_registry, load_config
from omni_rl.rewards.combined import CombinedReward
from omni_rl.serving import load_serve_config
from omni_rl.serving.launch import start_servers

QUICKSTART = Path(__file__).parents[2] / "docs" / "examples" / "quickstart.toml"
TOKEN_ENV = "OMNI_RL_TEST_SERVE_TOKEN"
TOKEN = "integration-serve-token-42"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _post(url: str, data: bytes, token: str | None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())  # JSON, or this fails: a plain-text answer is the bug


def _bomb() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 12_000, 12_000, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    body = {"images": {"encoding": "png", "data": [base64.b64encode(png).decode()]}, "prompts": ["a red circle"]}
    return json.dumps(body).encode()


def test_a_token_protected_server_with_limits(
    ray_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray import serve

    monkeypatch.setenv(TOKEN_ENV, TOKEN)  # before the replica starts: it reads the token where it runs
    port = _free_port()
    serve_config = tmp_path / "serve.toml"
    serve_config.write_text(
        f'[server]\nport = {port}\ntoken_env = "{TOKEN_ENV}"\nmax_image_pixels = 4096\n\n'
        '[[reward]]\nname = "shapes"\nresources = { CPU = 0.5 }\n'
    )
    config = load_serve_config(serve_config, [], get_registry())
    try:
        (url,) = start_servers(config)
        assert _post(url, _bomb(), None)[0] == 401
        status, document = _post(url, _bomb(), TOKEN)
        assert status == 400 and "12000x12000 = 144,000,000 pixels" in document["error"]
        status, document = _post(url, b"[" * 100_000, TOKEN)
        assert status == 400 and "nested too deeply" in document["error"]

        images = np.full((2, 32, 32, 3), 255, dtype=np.uint8)
        options = f'reward.0.options={{url = "{url}", api_key_env = "{TOKEN_ENV}"}}'
        rewards = CombinedReward(load_config(QUICKSTART, ['reward.0.name="http"', options]).rewards, None)
        scored = rewards(images, ["a red circle", "a blue square"], [{}, {}])
        assert scored.failures == {} and scored.total.shape == (2,)
    finally:
        serve.shutdown()
