"""The reward servers' JSON protocol (omni_rl.rewards.protocol): lossless both ways, and every malformed field
named in the error (a server answers it with HTTP 400)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from omni_rl.batch import RewardResult
from omni_rl.rewards.protocol import (
    PROTOCOL,
    ProtocolError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    png_data_url,
)

IMAGES = np.random.default_rng(0).integers(0, 256, size=(3, 5, 7, 3), dtype=np.uint8)
PROMPTS = ["a", "b", 'c "quoted"']


@pytest.mark.parametrize("encoding", ["png", "raw"])
def test_a_request_survives_json_with_the_same_pixels(encoding: str) -> None:
    metadata = [{"k": np.int64(3), "v": np.array([1.5, 2.0])}, {}, {"tag": "x"}]
    body = json.loads(json.dumps(encode_request(IMAGES, PROMPTS, metadata, encoding)))  # the wire is JSON text
    assert body["protocol"] == PROTOCOL and body["images"]["encoding"] == encoding
    images, prompts, meta = decode_request(body)
    np.testing.assert_array_equal(images, IMAGES)
    assert images.dtype == np.uint8
    assert prompts == PROMPTS
    assert meta == [{"k": 3, "v": [1.5, 2.0]}, {}, {"tag": "x"}]


def test_a_response_round_trips_and_non_finite_scores_travel_as_null() -> None:
    result = RewardResult(scores=np.array([0.5, np.nan, 1.0]), details={"count": np.array([1, 0, 1])}, failures=1)
    body = json.loads(json.dumps(encode_response(result)))
    assert body["scores"] == [0.5, None, 1.0]
    back = decode_response(body, 3)
    np.testing.assert_array_equal(back.scores, [0.5, np.nan, 1.0])
    np.testing.assert_array_equal(back.details["count"], [1.0, 0.0, 1.0])
    assert back.failures == 1


def test_the_data_url_is_a_png_of_the_image() -> None:
    import base64
    import io

    from PIL import Image

    url = png_data_url(IMAGES[0])
    assert url.startswith("data:image/png;base64,")
    decoded = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert decoded.format == "PNG"
    np.testing.assert_array_equal(np.asarray(decoded), IMAGES[0])


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda b: b.update(protocol="omni-rl-reward/9"), "protocol"),
        (lambda b: b.update(prompts=["a"]), "pair up"),
        (lambda b: b.update(prompts="abc"), "prompts"),
        (lambda b: b["images"].update(shape=[3, 5, 7]), "images.shape"),
        (lambda b: b["images"].update(dtype="float32"), "images.dtype"),
        (lambda b: b["images"].update(data="!!!"), "images.data"),
        (lambda b: b["images"].update(shape=[3, 5, 7, 4]), "images.shape"),  # RGB only, found before the data
        (lambda b: b["images"].update(shape=[3, 5, 8, 3]), "images.data"),
        (lambda b: b["images"].update(encoding="jpeg"), "images.encoding"),
        (lambda b: b.update(metadata=[1, 2, 3]), "metadata"),
    ],
)
def test_a_malformed_request_names_its_field(mutate, field: str) -> None:
    body = encode_request(IMAGES, PROMPTS, [{}] * 3, "raw")
    mutate(body)
    with pytest.raises(ProtocolError, match=field.replace(".", r"\.")):
        decode_request(body)


def test_a_response_with_the_wrong_count_is_refused() -> None:
    with pytest.raises(ProtocolError, match="list of 3 numbers, got 2"):
        decode_response({"scores": [1.0, 2.0]}, 3)
    with pytest.raises(ProtocolError, match=r"details\.x"):
        decode_response({"scores": [1, 2, 3], "details": {"x": [1]}}, 3)


def test_metadata_json_cannot_carry_is_refused_by_name() -> None:
    with pytest.raises(ProtocolError, match=r"metadata\[1\]\.blob is a bytes"):
        encode_request(IMAGES, PROMPTS, [{}, {"blob": b"\x00"}, {}])
