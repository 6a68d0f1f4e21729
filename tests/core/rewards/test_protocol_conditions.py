"""Condition images (an edit's sources) on the reward wire protocol (issue 49): each distinct image sent once as a
PNG with per-sample indices, decoded aligned with the images, counted with them against the pixel and image
limits before anything is decoded, and refused by name when malformed or sent to a reward that does not read
them."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np
import pytest
from PIL import Image

from omni_rl.rewards.protocol import (
    MAX_CONDITIONS_PER_SAMPLE,
    PixelLimits,
    ProtocolError,
    UnsupportedImageFormat,
    decode_request,
    encode_request,
    read_request,
)

RNG = np.random.default_rng(4)
IMAGES = RNG.integers(0, 256, size=(4, 5, 7, 3), dtype=np.uint8)
PROMPTS = ["make it blue", "make it blue", "put the cat on the sofa", "a text-only row"]
SOFA = RNG.integers(0, 256, size=(6, 9, 3), dtype=np.uint8)
CAT = RNG.integers(0, 256, size=(4, 4, 3), dtype=np.uint8)
#: a group of two sharing one source, a sample with two sources (one of them the same), one without
CONDITIONS = [(SOFA,), (SOFA.copy(),), (SOFA, CAT), ()]


def _body(conditions: Any = CONDITIONS, encoding: str = "png") -> dict[str, Any]:
    return json.loads(json.dumps(encode_request(IMAGES, PROMPTS, [{}] * 4, encoding, conditions)))  # type: ignore[arg-type]


@pytest.mark.parametrize("encoding", ["png", "raw"])
def test_conditions_travel_once_each_and_come_back_aligned(encoding: str) -> None:
    body = _body(encoding=encoding)
    assert len(body["conditions"]["data"]) == 2  # the sofa once, though three samples (two copies) hold it
    assert body["conditions"]["samples"] == [[0], [0], [0, 1], []]
    request = read_request(body)
    np.testing.assert_array_equal(request.images, IMAGES)
    assert [len(sample) for sample in request.conditions] == [1, 1, 2, 0]
    for got, sent in zip(request.conditions, CONDITIONS, strict=True):
        for image, expected in zip(got, sent, strict=True):
            assert image.dtype == np.uint8
            np.testing.assert_array_equal(image, expected)  # PNG: the reward sees the sources' exact pixels


def test_a_request_without_conditions_has_none_and_decode_request_keeps_its_shape() -> None:
    body = encode_request(IMAGES, PROMPTS, [{}] * 4)
    assert "conditions" not in body and read_request(body).conditions == []
    images, prompts, metadata = decode_request(_body())
    np.testing.assert_array_equal(images, IMAGES)
    assert prompts == PROMPTS and metadata == [{}] * 4


def _png(image: np.ndarray) -> str:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.mark.parametrize(
    ("conditions", "message"),
    [
        ([1, 2], r'"conditions" must be an object'),
        ({"encoding": "raw", "data": [], "samples": []}, r'"conditions\.encoding" must be "png"'),
        ({"encoding": "png", "data": "x", "samples": []}, r'"conditions\.data" must be a list'),
        ({"encoding": "png", "data": [], "samples": {}}, r'"conditions\.samples" must be a list'),
        ({"encoding": "png", "data": [], "samples": [[True]] * 4}, r'"conditions\.samples\[0\]" must be a list of'),
        ({"encoding": "png", "data": [], "samples": [[0]] * 4}, r"refers past \"conditions\.data\", which holds 0"),
        ({"encoding": "png", "data": [_png(CAT)], "samples": [[0]] * 3}, r"has 3 entries for 4 images"),
        (
            {"encoding": "png", "data": [_png(CAT)], "samples": [[0] * (MAX_CONDITIONS_PER_SAMPLE + 1)] * 4},
            rf"lists {MAX_CONDITIONS_PER_SAMPLE + 1} condition images; a sample takes at most",
        ),
        ({"encoding": "png", "data": ["!!"], "samples": [[0]] * 4}, r'"conditions\.data\[0\]" is not valid base64'),
    ],
)
def test_a_malformed_conditions_field_is_named(conditions: Any, message: str) -> None:
    body = {**_body(None), "conditions": conditions}
    with pytest.raises(ProtocolError, match=message):
        read_request(body)


def test_a_condition_that_is_not_a_png_is_refused_as_an_unsupported_format() -> None:
    gif = io.BytesIO()
    Image.fromarray(CAT).save(gif, format="GIF")
    body = {**_body(None), "conditions": {"encoding": "png", "data": [base64.b64encode(gif.getvalue()).decode()]}}
    body["conditions"]["samples"] = [[0]] * 4
    with pytest.raises(UnsupportedImageFormat, match=r'"conditions\.data\[0\]" is not a PNG'):
        read_request(body)


def test_conditions_count_with_the_images_before_anything_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Any] = []
    monkeypatch.setattr(Image, "open", lambda *a, **k: opened.append(a))
    # 4 images + 2 distinct condition images = 6 > 5, refused before any PNG is opened (images or conditions)
    with pytest.raises(ProtocolError, match=r"holds 6 images \(every frame and condition image counted\)"):
        read_request(_body(), PixelLimits(images=5))
    assert opened == []


def test_conditions_pixels_count_with_the_images_pixels() -> None:
    images_pixels = 4 * 5 * 7
    conditions_pixels = 6 * 9 + 4 * 4
    read_request(_body(), PixelLimits(per_request=images_pixels + conditions_pixels, images=6))  # exactly at it
    with pytest.raises(ProtocolError, match="hold more than 209 pixels"):
        read_request(_body(), PixelLimits(per_request=images_pixels + conditions_pixels - 1))
    with pytest.raises(ProtocolError, match=r'"conditions\.data\[0\]" is 9x6 = 54 pixels; .* at most 50 per image'):
        read_request(_body(), PixelLimits(per_image=50))


def test_a_reward_that_does_not_read_conditions_refuses_them_by_name() -> None:
    with pytest.raises(ProtocolError, match=r'"reads_conditions": false.*options\.send_conditions = false'):
        read_request(_body(), conditions_allowed=False)
    read_request(_body(None), conditions_allowed=False)  # none sent: fine


def test_the_client_checks_what_it_sends() -> None:
    with pytest.raises(ProtocolError, match=r"2 samples' conditions for 4 prompts"):
        encode_request(IMAGES, PROMPTS, [{}] * 4, "png", CONDITIONS[:2])
    with pytest.raises(ProtocolError, match=r'"conditions\[0\]\[0\]" must be a uint8 RGB image'):
        encode_request(IMAGES, PROMPTS, [{}] * 4, "png", [(SOFA.astype(np.float32),), (), (), ()])
