"""What a reward server accepts from a client, and how it says no: the request-side half of a replica, without Ray.

A reward server may face a network (``[server] host = "0.0.0.0"``), so every request is bounded before it costs
anything: the body's size (checked from Content-Length, then while reading, so a liar is cut off too), every
image's and the whole request's pixels (from the image headers or the raw shape, before decoding or allocating:
a 187 KB PNG can declare 144 Mpixel, a 149-byte raw request 10^15 images), the image format (PNG only: Pillow's
other decoders, EPS's Ghostscript among them, never see a client's bytes), JSON nesting (a deeply nested body is
a RecursionError in the parser), and, with ``[server] token_env``, an ``Authorization: Bearer`` token checked
against its salted digest in constant time (:mod:`omni_rl.serving.token`), so its bytes cannot be found one at
a time by timing the answers. The body is decoded in a thread: the replica's event loop keeps answering others.
Condition images (an edit's sources) are taken only by a reward that reads them, and count against the same
limits as the images.

Every client error is a JSON ``{"error": ...}`` with a 4xx status (400 malformed, 401 no or wrong token, 405
method, 413 too large, 415 not PNG, 422 a request the reward refuses while scoring it: it raised ValueError or
RuntimeFailure, e.g. a one-frame clip or a prompt outside its grammar), never a 500: the ``http`` reward retries
5xx as server faults, and would retry a request that can never succeed. A 500 is the server's own failure (a
reward that is not set up, a ConfigError; out of memory). The JSON protocol itself is
:mod:`omni_rl.rewards.protocol`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import attrs
import numpy as np

from omni_rl.errors import OmniRLError, RuntimeFailure
from omni_rl.rewards.protocol import (
    NO_LIMITS,
    PROTOCOL,
    Conditions,
    PixelLimits,
    ProtocolError,
    ScoringRequest,
    UnsupportedImageFormat,
    read_request,
)
from omni_rl.serving.token import TokenDigest


@attrs.frozen(kw_only=True)
class ServeLimits:
    """A replica's bounds on each request (``[server]`` of the serve config)."""

    max_body_bytes: int = 64 * 2**20
    pixels: PixelLimits = NO_LIMITS
    #: the salted digest of ``[server] token_env``'s token (None = no token required); the token itself never
    #: leaves the ``serve-reward`` process (:mod:`omni_rl.serving.token`)
    token: TokenDigest | None = None


class ClientError(Exception):
    """A request this server refuses: its HTTP status and a one-line reason (sent as ``{"error": reason}``)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def check_token(authorization: str | None, token: TokenDigest | None) -> None:
    """Nothing when no token is required or ``authorization`` is ``Bearer <token>``; else ClientError(401). The
    comparison is of digests, in constant time (:meth:`TokenDigest.matches`)."""
    if token is None:
        return
    scheme, _, sent = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.matches(sent.strip()):
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


def parse_body(body: bytes, pixels: PixelLimits, reads_conditions: bool = False) -> ScoringRequest:
    """The request a body holds, or ClientError(400) saying what is wrong; condition images are taken only for a
    reward that ``reads_conditions`` (refused before any is decoded for another)."""
    try:
        document = json.loads(body)
    except RecursionError:
        raise ClientError(400, "bad request: the JSON is nested too deeply") from None
    except ValueError as exc:  # not JSON, or not UTF-8
        raise ClientError(400, f"bad request: the body is not JSON ({exc})") from None
    try:
        request = read_request(document, pixels, conditions_allowed=reads_conditions)
    except UnsupportedImageFormat as exc:
        raise ClientError(415, f"unsupported image: {exc}") from None
    except (ProtocolError, RecursionError) as exc:
        raise ClientError(400, f"bad request: {exc}") from None
    if not len(request.images):
        raise ClientError(400, "bad request: the request holds no images")
    return request


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
    describe: dict[str, Any],
    score: Callable[[Any, list[str], list[dict[str, Any]], Conditions], Awaitable[dict[str, Any]]],
) -> Answer:
    """One request from start to answer: the token, the method, the body within its limits, then
    ``score(images, prompts, metadata, conditions)`` (``conditions``: each sample's condition images, empty when
    the request holds none; it returns the response document or raises: ValueError or RuntimeFailure, the reward
    refusing these inputs, is a 422; any other failure a 500 with its text)."""
    try:
        check_token(headers.get("authorization"), limits.token)
        if method == "GET":
            return 200, {"protocol": PROTOCOL, **describe}
        if method != "POST":
            raise ClientError(405, f"method {method} is not served: POST scores, GET describes")
        body = await read_body(headers, chunks, limits.max_body_bytes)
        reads = bool(describe.get("reads_conditions"))
        request = await asyncio.to_thread(parse_body, body, limits.pixels, reads)
        check_rank(request.images, bool(describe.get("scores_video")))
    except ClientError as exc:
        return exc.status, {"error": exc.reason}
    reward = describe.get("reward", "")
    try:
        return 200, await score(request.images, request.prompts, request.metadata, request.conditions)
    except (ValueError, RuntimeFailure) as exc:  # the reward refuses these inputs: the client's to fix, not retried
        return 422, {"error": f"reward {reward!r} cannot score this request: {_one_line(exc)}"}
    except Exception as exc:  # the reward's failure, or ours: still JSON, never Starlette's plain-text 500
        return 500, {"error": f"reward {reward!r} failed: {_one_line(exc)}"}


def _one_line(exc: Exception) -> str:
    """``Type: message`` on one line (an OmniRLError's hint after a semicolon)."""
    text = str(exc)
    if isinstance(exc, OmniRLError):
        text = exc.message + (f"; {exc.hint}" if exc.hint else "")
    return f"{type(exc).__name__}: {' '.join(text.split())}"
