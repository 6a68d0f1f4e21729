"""``serve-reward``'s request side (issue 33, item 10): a body limit, pixel limits per image and per request read
from the image headers before decoding, JSON 4xx answers for every client error (a decompression bomb, deep
JSON, a 0x0 image, a wrong method), and an optional bearer token compared with hmac.compare_digest. Driven
through :func:`omni_rl.serving.limits.answer`, which the Ray Serve replica calls with its Starlette request."""

from __future__ import annotations

import asyncio
import base64
import hmac
import io
import json
import struct
import time
import zlib
from collections.abc import AsyncIterator
from typing import Any

import attrs
import numpy as np
import pytest
from PIL import Image

from omni_rl.cli.serve_cmd import require_token
from omni_rl.errors import ConfigError, RuntimeFailure
from omni_rl.rewards.protocol import PixelLimits, decode_images, encode_images, encode_request
from omni_rl.serving.limits import ServeLimits, answer
from omni_rl.serving.token import TokenDigest, read_token_digest

LIMITS = ServeLimits(max_body_bytes=200_000, pixels=PixelLimits(per_image=64 * 64, per_request=3 * 64 * 64))
TOKEN = "t0k3n-for-tests"


async def _chunks(body: bytes, size: int = 4096) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


async def _score(
    images: np.ndarray, prompts: list[str], metadata: list[dict[str, Any]], conditions: list[tuple[np.ndarray, ...]]
) -> dict[str, Any]:
    if prompts and prompts[0] == "fail":
        raise RuntimeError("the model ran out of memory")
    if prompts and prompts[0] == "outside the grammar":
        raise ValueError(f"prompt {prompts[0]!r} is not in the grammar")
    if prompts and prompts[0] == "no metadata":
        raise RuntimeFailure("the toy reward cannot score sample 0: no tag", hint="train on a .jsonl\nprompt file")
    if prompts and prompts[0] == "not set up":
        raise ConfigError("the toy reward cannot load its detector")
    return {"scores": [float(image.mean()) for image in images], "details": {}, "failures": 0}


def _ask(
    body: bytes | dict[str, Any],
    *,
    method: str = "POST",
    token: str = "",
    headers: dict[str, str] | None = None,
    declare_length: bool = True,
    limits: ServeLimits = LIMITS,
    describe: dict[str, Any] | None = None,
) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    sent = {"content-length": str(len(data))} if declare_length else {}
    sent.update(headers or {})
    if token:
        limits = attrs.evolve(limits, token=TokenDigest.of(token))
    status, document = asyncio.run(answer(method, sent, _chunks(data), limits, describe or {"reward": "toy"}, _score))
    json.dumps(document)  # always a JSON document
    return status, document


def _request(images: np.ndarray, prompts: list[str] | None = None, encoding: str = "png") -> dict[str, Any]:
    prompts = prompts if prompts is not None else ["p"] * len(images)
    return encode_request(images, prompts, [{} for _ in prompts], encoding)  # type: ignore[arg-type]


def _png_header_only(width: int, height: int) -> str:
    """A PNG that declares ``width`` x ``height`` pixels in a few dozen bytes (its pixel data cut short): what a
    decompression bomb looks like to a server before it decodes."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    return base64.b64encode(png).decode()


def _real_png(width: int, height: int) -> str:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (10, 20, 30)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _png_body(*pngs: str) -> dict[str, Any]:
    return {"images": {"encoding": "png", "data": list(pngs)}, "prompts": ["p"] * len(pngs)}


IMAGES = np.random.default_rng(0).integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)


def test_a_good_request_is_scored() -> None:
    for encoding in ("png", "raw"):
        status, document = _ask(_request(IMAGES, encoding=encoding))
        assert status == 200 and document["scores"] == pytest.approx([float(i.mean()) for i in IMAGES])
    assert _ask(b"", method="GET") == (200, {"protocol": "omni-rl-reward/1", "reward": "toy"})


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        # 144 Mpixel declared in ~100 bytes: refused from the header (PIL's own bomb check fires past 179 Mpixel)
        (_png_body(_png_header_only(12_000, 12_000)), 400, "12000x12000 = 144,000,000 pixels; this server takes"),
        (_png_body(_png_header_only(100, 100)), 400, "100x100 = 10,000 pixels; this server takes at most 4,096 per"),
        (_png_body(_png_header_only(20_000, 20_000)), 400, "not a readable PNG: DecompressionBombError"),
        (_png_body(*[_real_png(64, 64)] * 3, _real_png(8, 8)), 400,
         "more than 12,288 pixels (this server's limit per request)"),
        (_png_body(base64.b64encode(b"\x89PNG\r\n\x1a\nnot really").decode()), 400, "is not a readable PNG"),
        ({"images": {"encoding": "raw", "dtype": "uint8", "shape": [1, 0, 0, 3], "data": ""}, "prompts": ["p"]},
         400, "is 0x0: an image needs at least one pixel"),
        ({"images": {"encoding": "raw", "dtype": "uint8", "shape": [0, 8, 8, 3], "data": ""}, "prompts": []},
         400, "the request holds no images"),
        (b"[" * 200_00 + b"]" * 200_00, 400, "nested too deeply"),
        (b"\xff\xfe not json", 400, "the body is not JSON"),
        ({"images": {"encoding": "gif"}, "prompts": []}, 400, '"images.encoding" must be one of'),
    ],
    ids=["bomb-144mp", "too-large", "bomb-400mp", "request-pixels", "broken-png", "zero-size", "no-images", "deep-json",
         "not-json", "bad-field"],
)  # fmt: skip
def test_client_errors_are_json_4xx(body: Any, status: int, message: str) -> None:
    got, document = _ask(body)
    assert got == status and message in document["error"], document


def test_pils_own_bomb_check_is_a_400_without_limits_too() -> None:
    no_limits = ServeLimits(max_body_bytes=200_000)
    status, document = _ask(_png_body(_png_header_only(20_000, 20_000)), limits=no_limits)
    assert status == 400 and "DecompressionBombError" in document["error"]


def test_the_body_limit_holds_with_and_without_a_content_length() -> None:
    big = json.dumps(_request(np.zeros((1, 64, 64, 3), dtype=np.uint8), ["x" * 300_000])).encode()
    status, document = _ask(big)
    assert status == 413 and "this server reads at most 200,000" in document["error"]
    status, document = _ask(big, declare_length=False)  # no length declared: cut off while reading
    assert status == 413 and "over 200,000 bytes" in document["error"]
    status, _ = _ask(big, headers={"content-length": "12"})  # a length that lies
    assert status == 413


def test_a_failing_reward_is_a_json_500_and_other_methods_a_405() -> None:
    status, document = _ask(_request(IMAGES[:1], ["fail"]))
    assert status == 500 and document == {"error": "reward 'toy' failed: RuntimeError: the model ran out of memory"}
    status, document = _ask(b"", method="PUT")
    assert status == 405 and "POST scores, GET describes" in document["error"]


def test_the_bearer_token_is_required_and_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    body = _request(IMAGES[:1])
    for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": f"Basic {TOKEN}"}):
        status, document = _ask(body, token=TOKEN, headers=headers)
        assert status == 401 and "bearer token" in document["error"] and TOKEN not in json.dumps(document)
    assert _ask(b"", method="GET", token=TOKEN)[0] == 401  # describing the endpoint needs the token too
    assert _ask(body, token=TOKEN, headers={"authorization": f"Bearer {TOKEN}"})[0] == 200
    # digests of equal length are compared, never the token itself (issue 48, N2: the replica has no token)
    assert compared and all(len(a) == len(b) == 32 for a, b in compared)
    assert all(TOKEN.encode() not in a + b for a, b in compared)


def test_a_configured_token_variable_must_be_set_to_one_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMNI_RL_TEST_SERVE_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=r"OMNI_RL_TEST_SERVE_TOKEN, which is not set .* @ \$.server.token_env"):
        require_token("OMNI_RL_TEST_SERVE_TOKEN")
    with pytest.raises(ValueError, match="not set"):
        read_token_digest("OMNI_RL_TEST_SERVE_TOKEN")
    monkeypatch.setenv("OMNI_RL_TEST_SERVE_TOKEN", f"{TOKEN}\r\nsecond-{TOKEN}")
    with pytest.raises(ConfigError, match=r"holds a control character.* @ \$.server.token_env") as caught:
        require_token("OMNI_RL_TEST_SERVE_TOKEN")
    assert TOKEN not in str(caught.value)
    monkeypatch.setenv("OMNI_RL_TEST_SERVE_TOKEN", TOKEN + "\n")  # a final newline (a Kubernetes Secret) is dropped
    require_token("OMNI_RL_TEST_SERVE_TOKEN")
    digest = read_token_digest("OMNI_RL_TEST_SERVE_TOKEN")
    assert digest is not None and digest.matches(TOKEN) and not digest.matches(TOKEN + "x")
    assert read_token_digest("") is None


def test_a_real_png_at_the_limit_is_accepted() -> None:
    status, document = _ask(_png_body(_real_png(64, 64)))
    assert status == 200 and document["scores"] == [20.0]


def test_the_replicas_get_a_salted_digest_never_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 48, N2: Ray logs what it is given for its actors (a runtime_env's env_vars were in clear in
    runtime_env_agent.log); what the replicas are given now holds no form of the token."""
    import pickle

    monkeypatch.setenv("OMNI_RL_TEST_SERVE_TOKEN", TOKEN)
    one, two = (read_token_digest("OMNI_RL_TEST_SERVE_TOKEN") for _ in range(2))
    assert one is not None and two is not None and one.digest != two.digest  # a fresh salt for every start
    limits = ServeLimits(token=one)
    assert TOKEN not in pickle.dumps(limits).decode("latin-1")
    for text in (repr(limits), str(limits)):
        assert TOKEN not in text and one.digest.hex() not in text and "digest" not in text
    assert pickle.loads(pickle.dumps(limits)).token.matches(TOKEN)


# -- videos: N videos of F frames (N, F, H, W, 3), for a reward that scores whole videos --------------------------

VIDEOS = np.random.default_rng(2).integers(0, 256, size=(2, 3, 16, 16, 3), dtype=np.uint8)
VIDEO_REWARD = {"reward": "motion", "scores_video": True}


@pytest.mark.parametrize("encoding", ["png", "raw"])
def test_videos_round_trip_frame_for_frame(encoding: str) -> None:
    field = encode_images(VIDEOS, encoding)  # type: ignore[arg-type]
    if encoding == "raw":
        assert field["shape"] == [2, 3, 16, 16, 3]
    else:
        assert field["frames"] == 3 and len(field["data"]) == 6
    np.testing.assert_array_equal(decode_images(json.loads(json.dumps(field))), VIDEOS)


@pytest.mark.parametrize("encoding", ["png", "raw"])
def test_a_video_reward_is_sent_videos_and_an_image_reward_refuses_them(encoding: str) -> None:
    status, document = _ask(_request(VIDEOS, encoding=encoding), describe=VIDEO_REWARD)
    assert status == 200 and document["scores"] == pytest.approx([float(v.mean()) for v in VIDEOS])
    status, document = _ask(_request(VIDEOS, encoding=encoding))
    assert status == 400 and "scores images and the request holds videos" in document["error"]
    status, document = _ask(_request(VIDEOS[:, 0], encoding=encoding), describe=VIDEO_REWARD)
    assert status == 400 and "options.scores_video = true" in document["error"]


@pytest.mark.parametrize("encoding", ["png", "raw"])
def test_every_frame_counts_against_the_pixel_limit(encoding: str) -> None:
    """Three 64x64 frames are the per-request limit: a fourth frame (two videos of two) is over it."""
    videos = np.zeros((2, 2, 64, 64, 3), dtype=np.uint8)
    status, document = _ask(_request(videos, encoding=encoding), describe=VIDEO_REWARD)
    assert status == 400 and "more than 12,288 pixels" in document["error"]


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ({"encoding": "png", "frames": 0, "data": []}, '"images.frames" must be a positive integer'),
        ({"encoding": "png", "frames": 2, "data": [_real_png(4, 4)] * 3}, "not a whole number of 2-frame videos"),
        ({"encoding": "raw", "dtype": "uint8", "shape": [1, 2, 3, 4, 5, 3], "data": ""}, "[N, F, H, W, 3]"),
        ({"encoding": "raw", "dtype": "uint8", "shape": [1, 0, 8, 8, 3], "data": ""}, "0 frames per video"),
    ],
)
def test_malformed_video_fields_are_a_400(field: dict[str, Any], message: str) -> None:
    status, document = _ask({"images": field, "prompts": ["p"]}, describe=VIDEO_REWARD)
    assert status == 400 and message in document["error"], document


# -- hostile requests (issue 48): cheap to refuse, PNG only, a reward's refusal is the client's ------------------


def _raw(shape: list[int], data: str = "") -> dict[str, Any]:
    return {"images": {"encoding": "raw", "dtype": "uint8", "shape": shape, "data": data}, "prompts": ["p"]}


@pytest.mark.parametrize(
    ("body", "limits", "describe", "message"),
    [
        (_raw([10**15, 1, 1, 3]), LIMITS, None, "more than 12,288 pixels"),
        (_raw([1, 10**12, 1, 1, 3]), LIMITS, VIDEO_REWARD, "more than 12,288 pixels"),
        (_raw([10**6, 10**6, 1, 1, 3]), LIMITS, VIDEO_REWARD, "more than 12,288 pixels"),
        (_raw([1, 10**9, 10**9, 3]), LIMITS, None, "this server takes at most 4,096 per image"),
        # without pixel limits the data actually sent bounds it: no array of the declared size is ever made
        (_raw([10**15, 1, 1, 3]), ServeLimits(max_body_bytes=200_000), None, "base64 characters but shape"),
        (_raw([2, 64, 64, 3], "AAAA"), LIMITS, None, "holds 4 base64 characters but shape [2, 64, 64, 3] needs 24576"),
        (_raw([1, 8, 8, 10**12]), LIMITS, None, "must end in 3 (RGB channels)"),
    ],
    ids=["10^15-images", "10^12-frames", "10^6-videos", "huge-image", "no-limits", "short-data", "channels"],
)
def test_a_hostile_declared_shape_is_refused_in_milliseconds(
    body: dict[str, Any], limits: ServeLimits, describe: dict[str, Any] | None, message: str
) -> None:
    """Issue 48, N3: a 149-byte request declaring [10**15, 1, 1, 3] cost ~8 s of a replica's CPU (a Python loop
    over the declared images) before its 400; the shape is now checked with one multiplication."""
    start = time.perf_counter()
    status, document = _ask(body, limits=limits, describe=describe)
    elapsed = time.perf_counter() - start
    assert status == 400 and message in document["error"], document
    assert elapsed < 0.2, f"{elapsed:.3f} s to refuse a {len(json.dumps(body))}-byte request"


def test_png_frames_that_make_no_whole_video_are_refused_before_any_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Any] = []
    real_open = Image.open
    monkeypatch.setattr(Image, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    field = {"encoding": "png", "frames": 10**12, "data": [_real_png(4, 4)] * 3}
    status, document = _ask({"images": field, "prompts": ["p"]}, describe=VIDEO_REWARD)
    assert status == 400 and "not a whole number of 1000000000000-frame videos" in document["error"]
    assert opened == []


def _encoded(image: Image.Image, kind: str) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format=kind)
    return base64.b64encode(buffer.getvalue()).decode()


EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 8 8\nnewpath 0 0 moveto 8 8 lineto stroke\nshowpage\n%%EOF\n"


@pytest.mark.parametrize("kind", ["EPS", "TIFF", "BMP", "JPEG", "GIF", "WEBP", "PNG-lookalike"])
def test_only_pngs_are_decoded_other_formats_are_a_415_before_any_decoder(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48, N4: any format Pillow knows was decoded (an EPS body reached Ghostscript). Now the PNG signature
    is checked before Pillow opens anything, and Pillow is told PNG only."""
    image = Image.new("RGB", (8, 8), (200, 10, 10))
    data = {
        "EPS": base64.b64encode(EPS).decode(),
        "PNG-lookalike": base64.b64encode(b"\x89PNX\r\n\x1a\n" + b"\0" * 32).decode(),
    }.get(kind) or _encoded(image, kind)
    opened: list[Any] = []
    monkeypatch.setattr(Image, "open", lambda *a, **k: opened.append(a))
    status, document = _ask(_png_body(data))
    assert status == 415 and "is not a PNG" in document["error"], document
    assert opened == []  # no decoder saw the bytes


def test_pillow_is_asked_for_png_only() -> None:
    seen: list[Any] = []
    real_open = Image.open

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("formats"))
        return real_open(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Image, "open", spy)
        assert _ask(_png_body(_real_png(8, 8)))[0] == 200
    assert seen == [["PNG"]]


def test_an_unreadable_png_names_no_memory_address() -> None:
    status, document = _ask(_png_body(base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 40).decode()))
    assert status == 400 and "is not a readable PNG" in document["error"] and "0x" not in document["error"]


def test_a_reward_refusing_its_inputs_is_a_422_the_client_does_not_retry() -> None:
    """A one-frame clip to shapes_motion or a prompt outside its grammar raised ValueError in the reward and was a
    500, which the http reward retries as a server fault. A ValueError from the reward is the request's fault."""
    status, document = _ask(_request(IMAGES[:1], ["outside the grammar"]))
    reason = "ValueError: prompt 'outside the grammar' is not in the grammar"
    assert status == 422 and document == {"error": f"reward 'toy' cannot score this request: {reason}"}
    # the prompt-level RuntimeFailure rewards raise (shapes' grammar, geneval's metadata): 422, hint on the same line
    status, document = _ask(_request(IMAGES[:1], ["no metadata"]))
    reason = "RuntimeFailure: the toy reward cannot score sample 0: no tag; train on a .jsonl prompt file"
    assert status == 422 and document == {"error": f"reward 'toy' cannot score this request: {reason}"}
    # a reward that is not set up is the server's failure
    status, document = _ask(_request(IMAGES[:1], ["not set up"]))
    assert status == 500 and "ConfigError: the toy reward cannot load its detector" in document["error"]


def test_the_count_of_images_is_bounded_before_any_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64 MiB body holds 700,000 one-pixel PNGs (about 90 s of decoding under every pixel limit): the count
    is checked first ([server] max_request_images), for PNGs and raw shapes alike, every frame counted."""
    few = ServeLimits(max_body_bytes=2**20, pixels=PixelLimits(per_image=64, per_request=10**6, images=4))
    opened: list[Any] = []
    monkeypatch.setattr(Image, "open", lambda *a, **k: opened.append(a))
    status, document = _ask(_png_body(*[_real_png(1, 1)] * 5), limits=few)
    assert status == 400 and "holds 5 images (every frame counted); this server takes at most 4" in document["error"]
    assert opened == []
    status, document = _ask(_raw([1, 5, 1, 1, 3], "A" * 20), limits=few, describe=VIDEO_REWARD)
    assert status == 400 and "holds 5 images" in document["error"]
    monkeypatch.undo()
    assert _ask(_png_body(*[_real_png(1, 1)] * 4), limits=few)[0] == 200
