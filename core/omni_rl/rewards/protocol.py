"""The JSON protocol of reward servers (``omni-rl serve-reward``) and of the ``http`` reward that calls them.

One ``POST`` scores a batch; ``GET`` on the same URL says what is served. JSON only, never pickle: a reward
server may be shared by several teams' runs, and unpickling a request would let any client run code in it.
docs/rewards.md documents the format for servers written in other languages; in short::

    request  {"protocol": "omni-rl-reward/1",
              "images": {"encoding": "png", "data": ["<base64 PNG>", ...]}   (PNG only: other formats are a 415)
                     or {"encoding": "raw", "dtype": "uint8", "shape": [N, H, W, 3], "data": "<base64 bytes>"},
              "prompts": ["...", ...], "metadata": [{...}, ...]}
    videos   the same with "images" holding N videos of F frames: {"encoding": "png", "frames": F, "data": [N·F
             PNGs, video by video]} or raw with "shape": [N, F, H, W, 3]; only a reward that scores whole videos
             (GET says "scores_video": true) takes them
    sources  optionally "conditions": {"encoding": "png", "data": ["<base64 PNG>", ...], "samples": [[0], [0, 1],
             ...]}: each distinct condition image (an edit's source) once, and per sample the indices of its own in
             order ([] = none); only a reward that reads them (GET says "reads_conditions": true) takes them
    response {"scores": [float, ...], "details": {"<sub-score>": [float, ...]}, "failures": int}
    error    HTTP 4xx/5xx with {"error": "<what went wrong>"}

Kept in the core (not in a plugin) because both ends need it: the server the core's CLI starts and the
client reward a plugin provides.
"""

from __future__ import annotations

import base64
import hashlib
import io
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs
import numpy as np

from omni_rl.batch import RewardResult

PROTOCOL = "omni-rl-reward/1"
#: the repr of the in-memory file Pillow quotes in "cannot identify image file <_io.BytesIO object at 0x...>"
_IO_REPR = re.compile(r" ?<_io\.BytesIO object at 0x[0-9a-f]+>")
ImageEncoding = Literal["png", "raw"]
IMAGE_ENCODINGS: tuple[str, ...] = ("png", "raw")


class ProtocolError(ValueError):
    """A request or response that does not follow the protocol; the message says which field and why."""


class UnsupportedImageFormat(ProtocolError):
    """An image that is not a PNG (a server answers 415): refused from its first bytes, before any decoder runs."""


#: the first 8 bytes of every PNG file
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: condition images one sample may list: a bound on mistakes (Qwen-Image-Edit-Plus takes 3)
MAX_CONDITIONS_PER_SAMPLE = 16


@attrs.frozen(kw_only=True)
class PixelLimits:
    """How many pixels a server decodes, checked from the image headers before any pixel is decoded.

    A PNG of a few hundred KB can declare 144 Mpixel (1.45 GB and 6 s to decode in a replica): the body size says
    nothing about the memory a request costs, so each image and the whole request have their own limit. None:
    no limit (a client decoding its own replies)."""

    per_image: int | None = None
    per_request: int | None = None
    #: images (every frame counted) one request may hold: each costs a decoder call whatever its size (a 64 MiB
    #: body holds 700,000 one-pixel PNGs, 90 s of decoding)
    images: int | None = None
    #: images and pixels the request's other part already takes (its condition images, counted with its images
    #: against the same limits): set by :meth:`spend`, never by a config
    spent_images: int = 0
    spent_pixels: int = 0

    def spend(self, images: int = 0, pixels: int = 0) -> PixelLimits:
        """These limits with ``images`` images of ``pixels`` pixels in all already taken by another part of the
        request: what is left for the rest (the errors still quote the limits themselves)."""
        return attrs.evolve(self, spent_images=self.spent_images + images, spent_pixels=self.spent_pixels + pixels)

    def check(self, index: int, height: int, width: int, so_far: int, where: str = "images.data") -> int:
        """``so_far`` plus this image's pixels, or ProtocolError when an image is empty or a limit is passed."""
        if height <= 0 or width <= 0:
            raise ProtocolError(f'"{where}[{index}]" is {width}x{height}: an image needs at least one pixel')
        pixels = height * width
        if self.per_image is not None and pixels > self.per_image:
            raise ProtocolError(
                f'"{where}[{index}]" is {width}x{height} = {pixels:,} pixels; this server takes at most '
                f"{self.per_image:,} per image"
            )
        total = so_far + pixels
        if self.per_request is not None and total + self.spent_pixels > self.per_request:
            raise self._over_request()
        return total

    def check_count(self, count: int) -> None:
        """ProtocolError when a request holds more than ``images`` images (checked before any is decoded)."""
        total = count + self.spent_images
        if self.images is not None and total > self.images:
            counted = "every frame and condition image counted" if self.spent_images else "every frame counted"
            raise ProtocolError(
                f"the request holds {total:,} images ({counted}); this server takes at most {self.images:,} "
                "per request: send fewer per request (the http reward's options.batch_size)"
            )

    def check_shape(self, count: int, height: int, width: int) -> None:
        """``count`` images (every frame counted) of ``height`` x ``width``, checked with one multiplication of
        Python ints (no overflow, no loop over a count a client can make 10^15)."""
        self.check(0, height, width, 0)
        if self.per_request is not None and count * height * width + self.spent_pixels > self.per_request:
            raise self._over_request()
        self.check_count(count)

    def _over_request(self) -> ProtocolError:
        return ProtocolError(
            f"the request's images hold more than {self.per_request:,} pixels (this server's limit per request); "
            "send fewer or smaller images per request (the http reward's options.batch_size)"
        )


NO_LIMITS = PixelLimits()


# -- images ----------------------------------------------------------------------------------------------


def png_base64(image: np.ndarray) -> str:
    """One uint8 (H, W, 3) RGB image as base64 PNG text (lossless, so the server scores the same pixels)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image), mode="RGB").save(buffer, format="PNG", compress_level=1)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def png_data_url(image: np.ndarray) -> str:
    """``data:image/png;base64,...``: how OpenAI-compatible chat APIs take an image inline."""
    return "data:image/png;base64," + png_base64(image)


def encode_images(images: np.ndarray, encoding: ImageEncoding = "png") -> dict[str, Any]:
    """The ``images`` field of a request: images (N, H, W, 3) or videos (N, F, H, W, 3). ``raw`` skips PNG's
    compression (faster on a fast network)."""
    array = _checked_images(np.asarray(images), "images", videos=True)
    if encoding == "raw":
        data = base64.b64encode(np.ascontiguousarray(array).tobytes()).decode("ascii")
        return {"encoding": "raw", "dtype": "uint8", "shape": list(array.shape), "data": data}
    if encoding == "png":
        frames = array.reshape(-1, *array.shape[-3:])  # a video's frames one after another, video by video
        field: dict[str, Any] = {"encoding": "png", "data": [png_base64(image) for image in frames]}
        if array.ndim == 5:
            field["frames"] = int(array.shape[1])
        return field
    raise ProtocolError(f"unknown image encoding {encoding!r}; use one of {', '.join(IMAGE_ENCODINGS)}")


def decode_images(field: Any, limits: PixelLimits = NO_LIMITS) -> np.ndarray:
    """The uint8 (N, H, W, 3) array of a request's ``images`` field, or (N, F, H, W, 3) for videos, or
    ProtocolError (also for an image or frame past ``limits``, found before it is decoded; every frame counts)."""
    if not isinstance(field, Mapping):
        raise ProtocolError('"images" must be an object with "encoding" and "data"')
    encoding = field.get("encoding")
    if encoding == "raw":
        return _decode_raw(field, limits)
    if encoding == "png":
        frames = field.get("frames")
        if frames is not None and not (isinstance(frames, int) and not isinstance(frames, bool) and frames >= 1):
            raise ProtocolError(f'"images.frames" must be a positive integer (frames per video), got {frames!r}')
        data = field.get("data")
        if frames is not None and isinstance(data, list) and len(data) % frames:  # found before decoding any
            raise ProtocolError(f'"images.data" holds {len(data)} PNGs, not a whole number of {frames}-frame videos')
        images = _decode_png(data, limits)
        if frames is None:
            return images
        return images.reshape(len(images) // frames, frames, *images.shape[1:])
    raise ProtocolError(f'"images.encoding" must be one of {list(IMAGE_ENCODINGS)}, got {encoding!r}')


def _decode_raw(field: Mapping[str, Any], limits: PixelLimits) -> np.ndarray:
    if field.get("dtype") != "uint8":
        raise ProtocolError(f'"images.dtype" must be "uint8", got {field.get("dtype")!r}')
    shape = field.get("shape")
    if not (
        isinstance(shape, list)
        and len(shape) in (4, 5)
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape)
    ):
        raise ProtocolError(
            f'"images.shape" must be [N, H, W, 3] or, for videos, [N, F, H, W, 3] (non-negative integers), '
            f"got {shape!r}"
        )
    if len(shape) == 5 and shape[1] == 0:
        raise ProtocolError('"images.shape" has 0 frames per video: a video needs at least one frame')
    if shape[-1] != 3:
        raise ProtocolError(f'"images.shape" must end in 3 (RGB channels), got {shape!r}')
    # what the shape would cost, before anything is decoded or allocated: one product of Python ints (a 149-byte
    # request can declare [10**15, 1, 1, 3]), against the pixel limits, then against the data actually sent
    count = math.prod(shape[:-3])
    if count:
        limits.check_shape(count, shape[-3], shape[-2])
    data = field.get("data")
    if not isinstance(data, str):
        raise ProtocolError('"images.data" must be a base64 string')
    needed = math.prod(shape)
    if len(data) != 4 * -(-needed // 3):  # base64 of n bytes is 4 * ceil(n / 3) characters
        raise ProtocolError(f'"images.data" holds {len(data)} base64 characters but shape {shape} needs {needed} bytes')
    raw = _b64(data, "images.data")
    if len(raw) != needed:
        raise ProtocolError(f'"images.data" holds {len(raw)} bytes but shape {shape} needs {needed}')
    return _checked_images(np.frombuffer(raw, dtype=np.uint8).reshape(shape), "images", videos=True)


def _decode_png(data: Any, limits: PixelLimits) -> np.ndarray:
    images = _decode_png_list(data, limits, "images.data")
    if len({image.shape for image in images}) > 1:
        raise ProtocolError("the images of one request must all have the same height and width")
    return np.stack(images) if images else np.zeros((0, 0, 0, 3), dtype=np.uint8)


def _decode_png_list(data: Any, limits: PixelLimits, where: str) -> list[np.ndarray]:
    """Each base64 PNG of ``data`` as a uint8 (H, W, 3) array: the count checked before any is opened, each size
    from its header before its pixels are decoded, and only Pillow's PNG decoder ever run."""
    from PIL import Image

    if not isinstance(data, list):
        raise ProtocolError(f'"{where}" must be a list of base64 PNG strings')
    limits.check_count(len(data))
    images = []
    total = 0
    for i, item in enumerate(data):
        raw = _b64(item, f"{where}[{i}]")
        if not raw.startswith(PNG_SIGNATURE):  # PNG only: no other Pillow decoder (EPS runs Ghostscript) is reached
            raise UnsupportedImageFormat(f'"{where}[{i}]" is not a PNG (it does not start with the PNG signature)')
        try:
            with warnings.catch_warnings():  # PIL's bomb warning: the limits below refuse such an image anyway
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                opened = Image.open(io.BytesIO(raw), formats=["PNG"])  # the header only: the size, before any pixel
            with opened as image:
                total = limits.check(i, image.height, image.width, total, where)
                images.append(np.asarray(image.convert("RGB"), dtype=np.uint8))
        except ProtocolError:
            raise
        # whatever a client's bytes make PIL raise (OSError, SyntaxError, DecompressionBombError, ...) is the
        # client's error, answered 400, never a server fault the client would retry
        except Exception as exc:
            reason = _IO_REPR.sub("", f"{type(exc).__name__}: {exc}")  # not "<_io.BytesIO object at 0x7fef...>"
            raise ProtocolError(f'"{where}[{i}]" is not a readable PNG: {reason}') from exc
    return images


# -- condition images ------------------------------------------------------------------------------------

#: each sample's condition images (an edit's sources), aligned with the request's images; () = none
Conditions = list[tuple[np.ndarray, ...]]


def encode_conditions(conditions: Sequence[Sequence[np.ndarray]]) -> dict[str, Any]:
    """The ``conditions`` field of a request: every distinct condition image once, as a PNG (the samples of a
    group share their source: G copies of a 1 MP PNG would cost G times the bytes and the server's decoding),
    and per sample the indices of its images, in order."""
    data: list[str] = []
    index: dict[tuple[tuple[int, ...], bytes], int] = {}
    samples: list[list[int]] = []
    for i, sample in enumerate(conditions):
        refs = []
        for k, image in enumerate(sample):
            array = _checked_condition(np.asarray(image), f"conditions[{i}][{k}]")
            key = (array.shape, hashlib.blake2b(np.ascontiguousarray(array).tobytes(), digest_size=16).digest())
            if key not in index:
                index[key] = len(data)
                data.append(png_base64(array))
            refs.append(index[key])
        samples.append(refs)
    return {"encoding": "png", "data": data, "samples": samples}


@attrs.frozen
class _ConditionLayout:
    """A request's ``conditions`` field checked for its shape, nothing decoded yet."""

    data: list[Any]
    samples: list[list[int]]


def _condition_layout(field: Any) -> _ConditionLayout:
    if not isinstance(field, Mapping):
        raise ProtocolError('"conditions" must be an object with "encoding", "data" and "samples"')
    if field.get("encoding") != "png":
        raise ProtocolError(f'"conditions.encoding" must be "png", got {field.get("encoding")!r}')
    data, samples = field.get("data"), field.get("samples")
    if not isinstance(data, list):
        raise ProtocolError('"conditions.data" must be a list of base64 PNG strings')
    if not isinstance(samples, list):
        raise ProtocolError('"conditions.samples" must be a list (per sample, the indices of its condition images)')
    for i, refs in enumerate(samples):
        if not (isinstance(refs, list) and all(isinstance(k, int) and not isinstance(k, bool) for k in refs)):
            raise ProtocolError(f'"conditions.samples[{i}]" must be a list of indices into "conditions.data"')
        if len(refs) > MAX_CONDITIONS_PER_SAMPLE:
            raise ProtocolError(
                f'"conditions.samples[{i}]" lists {len(refs)} condition images; a sample takes at most '
                f"{MAX_CONDITIONS_PER_SAMPLE}"
            )
        if any(not 0 <= k < len(data) for k in refs):
            raise ProtocolError(
                f'"conditions.samples[{i}]" = {refs} refers past "conditions.data", which holds {len(data)} images'
            )
    return _ConditionLayout(data=data, samples=samples)


def _checked_condition(array: np.ndarray, where: str) -> np.ndarray:
    if array.ndim != 3 or array.shape[-1] != 3 or array.dtype != np.uint8:
        raise ProtocolError(f'"{where}" must be a uint8 RGB image of shape (H, W, 3), got {array.dtype} {array.shape}')
    return array


def _b64(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise ProtocolError(f'"{where}" must be a base64 string')
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as exc:
        raise ProtocolError(f'"{where}" is not valid base64: {exc}') from exc


def _checked_images(array: np.ndarray, where: str, videos: bool = False) -> np.ndarray:
    ranks = (4, 5) if videos else (4,)
    if array.ndim not in ranks or array.shape[-1] != 3 or array.dtype != np.uint8:
        shapes = "(N, H, W, 3) or videos (N, F, H, W, 3)" if videos else "(N, H, W, 3)"
        raise ProtocolError(f'"{where}" must be uint8 RGB images of shape {shapes}, got {array.dtype} {array.shape}')
    return array


# -- requests and responses ------------------------------------------------------------------------------


def encode_request(
    images: np.ndarray,
    prompts: Sequence[str],
    metadata: Sequence[Mapping[str, Any]],
    encoding: ImageEncoding = "png",
    conditions: Sequence[Sequence[np.ndarray]] | None = None,
) -> dict[str, Any]:
    """The JSON body of a scoring request (metadata made JSON-safe: numpy values become plain numbers);
    ``conditions``: each sample's condition images, sent (always as PNG) for a reward that reads them."""
    body = {
        "protocol": PROTOCOL,
        "images": encode_images(images, encoding),
        "prompts": [str(p) for p in prompts],
        "metadata": [_json_safe(dict(m), f"metadata[{i}]") for i, m in enumerate(metadata)],
    }
    if conditions is not None:
        if len(conditions) != len(prompts):
            raise ProtocolError(f"got {len(conditions)} samples' conditions for {len(prompts)} prompts")
        body["conditions"] = encode_conditions(conditions)
    return body


@attrs.frozen
class ScoringRequest:
    """A decoded request: what the reward is called with."""

    images: np.ndarray
    prompts: list[str]
    metadata: list[dict[str, Any]]
    #: each sample's condition images, aligned with ``images``; empty when the request holds none
    conditions: Conditions = attrs.field(factory=list)


def read_request(body: Any, limits: PixelLimits = NO_LIMITS, *, conditions_allowed: bool = True) -> ScoringRequest:
    """The request a body holds, or ProtocolError naming the bad field.

    Condition images count against the same limits as the images: their number with the images' before anything
    is decoded, their pixels with the images' as each header is read. ``conditions_allowed = False`` (a reward
    that does not read them) refuses a request that holds some before decoding any."""
    if not isinstance(body, Mapping):
        raise ProtocolError("the request body must be a JSON object")
    if body.get("protocol", PROTOCOL) != PROTOCOL:
        raise ProtocolError(f'unsupported "protocol" {body.get("protocol")!r}; this server speaks {PROTOCOL!r}')
    layout = _condition_layout(body["conditions"]) if body.get("conditions") is not None else None
    if layout is not None and not conditions_allowed:
        raise ProtocolError(
            '"conditions": this reward does not read condition images (its GET says "reads_conditions": false): '
            "send none (the http reward's options.send_conditions = false)"
        )
    images = decode_images(body.get("images"), limits.spend(images=len(layout.data) if layout else 0))
    prompts = body.get("prompts")
    if not (isinstance(prompts, list) and all(isinstance(p, str) for p in prompts)):
        raise ProtocolError('"prompts" must be a list of strings')
    metadata = body.get("metadata") or [{} for _ in prompts]
    if not (isinstance(metadata, list) and all(isinstance(m, dict) for m in metadata)):
        raise ProtocolError('"metadata" must be a list of objects (one per prompt)')
    if not len(images) == len(prompts) == len(metadata):
        raise ProtocolError(
            f"got {len(images)} images, {len(prompts)} prompts and {len(metadata)} metadata objects; they must pair up"
        )
    conditions: Conditions = []
    if layout is not None:
        if len(layout.samples) != len(images):
            raise ProtocolError(f'"conditions.samples" has {len(layout.samples)} entries for {len(images)} images')
        count = math.prod(images.shape[:-3])  # every frame of a video counted, as the limits count them
        taken = limits.spend(images=count, pixels=count * images.shape[-3] * images.shape[-2] if count else 0)
        decoded = _decode_png_list(layout.data, taken, "conditions.data")
        conditions = [tuple(decoded[k] for k in refs) for refs in layout.samples]
    return ScoringRequest(images=images, prompts=prompts, metadata=metadata, conditions=conditions)


def decode_request(body: Any, limits: PixelLimits = NO_LIMITS) -> tuple[np.ndarray, list[str], list[dict[str, Any]]]:
    """``(images, prompts, metadata)`` of a request body, or ProtocolError naming the bad field (its condition
    images, if any, are checked and left out: :func:`read_request` returns them)."""
    request = read_request(body, limits)
    return request.images, request.prompts, request.metadata


def encode_response(result: RewardResult | np.ndarray | Sequence[float]) -> dict[str, Any]:
    """The JSON body of a successful response. Non-finite scores travel as null (JSON has no NaN)."""
    result = RewardResult.coerce(result)
    return {
        "scores": _floats(result.scores),
        "details": {str(k): _floats(v) for k, v in result.details.items()},
        "failures": int(result.failures),
    }


def decode_response(body: Any, count: int) -> RewardResult:
    """The RewardResult of a response body for ``count`` samples (null scores become NaN), or ProtocolError."""
    if not isinstance(body, Mapping) or not isinstance(body.get("scores"), list):
        raise ProtocolError('the response must be a JSON object with a "scores" list')
    scores = _array(body["scores"], "scores", count)
    details_field = body.get("details") or {}
    if not isinstance(details_field, Mapping):
        raise ProtocolError('"details" must be an object of sub-score lists')
    details = {str(k): _array(v, f"details.{k}", count) for k, v in details_field.items()}
    failures = body.get("failures", 0)
    if not (isinstance(failures, int) and failures >= 0):
        raise ProtocolError(f'"failures" must be a non-negative integer, got {failures!r}')
    return RewardResult(scores=scores, details=details, failures=failures)


def _array(values: Any, where: str, count: int) -> np.ndarray:
    if not isinstance(values, list) or len(values) != count:
        got = len(values) if isinstance(values, list) else type(values).__name__
        raise ProtocolError(f'"{where}" must be a list of {count} numbers, got {got}')
    try:
        return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f'"{where}" must hold numbers: {exc}') from exc


def _floats(values: Any) -> list[float | None]:
    return [float(v) if math.isfinite(v) else None for v in np.asarray(values, dtype=np.float64).reshape(-1)]


def _json_safe(value: Any, where: str) -> Any:
    """Plain JSON values; numpy scalars and arrays (parquet metadata) converted, anything else refused."""
    if isinstance(value, Mapping):
        return {str(k): _json_safe(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist(), where)
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise ProtocolError(f"{where} is a {type(value).__name__}, which JSON cannot carry to a reward server")
