"""What a reward server accepts from a client, and how it says no: the request-side half of a replica, without Ray.

A reward server may face a network (``[server] host = "0.0.0.0"``), so every request is bounded before it costs
anything: the body's size (checked from Content-Length, then while reading, so a liar is cut off too), every
image's and the whole request's pixels (from the image headers, before decoding: a 187 KB PNG can declare 144
Mpixel), JSON nesting (a deeply nested body is a RecursionError in the parser), and, with ``[server] token_env``,
an ``Authorization: Bearer`` token compared in constant time (:func:`hmac.compare_digest`), so its bytes cannot
be found one at a time by timing the answers.

Every client error is a JSON ``{"error": ...}`` with a 4xx status (400 malformed, 401 no or wrong token, 405
method, 413 too large), never a plain-text 500: the ``http`` reward retries 5xx as server faults, and would retry
a request that can never succeed. The JSON protocol itself is :mod:`omni_rl.rewards.protocol`.
"""

from __future__ import annotations

import hmac
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import attrs
import numpy as np

from omni_rl.rewards.protocol import NO_LIMITS, PROTOCOL, PixelLimits, ProtocolError, decode_request


@attrs.frozen(kw_only=True)
class ServeLimits:
    """A replica's bounds on each request (``[server]`` of the serve config)."""

    max_body_bytes: int = 64 * 2**20
    pixels: PixelLimits = NO_LIMITS
    #: the NAME of the environment variable holding the bearer token ("" = none); the replica reads the token
    #: from its environment (:func:`read_token`, :func:`token_runtime_env`), so it is in no argument or repr
    token_env: str = ""


class ClientError(Exception):
    """A request this server refuses: its HTTP status and a one-line reason (sent as ``{"error": reason}``)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def read_token(token_env: str) -> str:
    """The token in ``$token_env`` ("" when no variable is configured); a configured but unset or empty one is
    an error: a server meant to be protected must not start open."""
    if not token_env:
        return ""
    token = os.environ.get(token_env, "")
    if not token:
        raise RuntimeError(
            f"[server] token_env names {token_env}, which is not set (or empty) where this reward replica runs; "
            f"export {token_env}=<token> before `omni-rl serve-reward` (on every node of a cluster)"
        )
    return token


def token_runtime_env(token_env: str) -> dict[str, Any]:
    """The replicas' ``ray_actor_options`` that give them ``$token_env`` from this process: so the token is
    exported once, where ``serve-reward`` runs, not on every node (a Ray worker started earlier, or on another
    machine, does not see this shell's variables). It then sits in Ray's record of the actors, which only clients
    of the cluster (Ray's token authentication) can read, and who could run code in the replicas anyway."""
    if not token_env or not os.environ.get(token_env):
        return {}
    return {"runtime_env": {"env_vars": {token_env: os.environ[token_env]}}}


def check_token(authorization: str | None, token: str) -> None:
    """Nothing when no token is required or ``authorization`` is ``Bearer <token>``; else ClientError(401). The
    comparison takes the same time wherever the first wrong byte is."""
    if not token:
        return
    scheme, _, sent = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(sent.strip().encode(), token.encode()):
        raise ClientError(401, "missing or wrong bearer token (send Authorization: Bearer <token>)")


async def read_body(headers: Mapping[str, str], chunks: AsyncIterator[bytes], limit: int) -> bytes:
    """The request body, at most ``limit`` bytes: refused from its Content-Length when that says more, and cut
    off while reading when the body turns out longer than it said (or it said nothing)."""
    declared = headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise ClientError(400, f"Content-Length {declared!r} is not a number") from None
        if size > limit:
            raise ClientError(413, f"the body is {size:,} bytes; this server reads at most {limit:,}")
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise ClientError(413, f"the body is over {limit:,} bytes, this server's limit")
    return bytes(body)


def parse_body(body: bytes, pixels: PixelLimits) -> tuple[Any, list[str], list[dict[str, Any]]]:
    """``(images, prompts, metadata)`` of a request body, or ClientError(400) saying what is wrong."""
    try:
        document = json.loads(body)
    except RecursionError:
        raise ClientError(400, "bad request: the JSON is nested too deeply") from None
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ClientError(400, f"bad request: the body is not JSON ({exc})") from None
    try:
        images, prompts, metadata = decode_request(document, pixels)
    except (ProtocolError, RecursionError) as exc:
        raise ClientError(400, f"bad request: {exc}") from None
    if not len(images):
        raise ClientError(400, "bad request: the request holds no images")
    return images, prompts, metadata


def check_rank(images: Any, scores_video: bool) -> None:
    """A video reward takes videos (N, F, H, W, 3) and an image reward images (N, H, W, 3); the other is a 400
    saying what to send."""
    if np.ndim(images) == 5 and not scores_video:
        raise ClientError(
            400,
            "bad request: this reward scores images and the request holds videos; send their frames as images "
            "(the http reward does, unless its options.scores_video is true)",
        )
    if np.ndim(images) == 4 and scores_video:
        raise ClientError(
            400,
            "bad request: this reward scores whole videos (N, F, H, W, 3) and the request holds images; score a "
            "video model's rollouts with it and set the http reward's options.scores_video = true",
        )


#: (status, JSON body) of an answer
Answer = tuple[int, dict[str, Any]]


async def answer(
    method: str,
    headers: Mapping[str, str],
    chunks: AsyncIterator[bytes],
    limits: ServeLimits,
    token: str,
    describe: dict[str, Any],
    score: Callable[[Any, list[str], list[dict[str, Any]]], Awaitable[dict[str, Any]]],
) -> Answer:
    """One request from start to answer: the token, the method, the body within its limits, then ``score``
    (which returns the response document or raises for a reward failure, answered 500 with its text)."""
    try:
        check_token(headers.get("authorization"), token)
        if method == "GET":
            return 200, {"protocol": PROTOCOL, **describe}
        if method != "POST":
            raise ClientError(405, f"method {method} is not served: POST scores, GET describes")
        images, prompts, metadata = parse_body(await read_body(headers, chunks, limits.max_body_bytes), limits.pixels)
        check_rank(images, bool(describe.get("scores_video")))
    except ClientError as exc:
        return exc.status, {"error": exc.reason}
    try:
        return 200, await score(images, prompts, metadata)
    except Exception as exc:  # the reward's failure, or ours: still JSON, never Starlette's plain-text 500
        return 500, {"error": f"reward {describe.get('reward', '')!r} failed: {type(exc).__name__}: {exc}"}
