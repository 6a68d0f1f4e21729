"""Option records of ``vlm_judge`` and ``http``.

Apart from the reward modules so that ``hooks.py`` hands these classes to the registry without importing
anything heavy. Neither record ever holds an API key: ``api_key_env`` is the *name* of the environment
variable holding it, so the key stays out of ``config.resolved.toml``, metrics and logs.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal

import attrs

from omni_rl.validators import int_between, non_negative_finite, non_negative_int, positive_finite, positive_int
from omni_rl_rewards_remote.managed.config import ManagedServerConfig
from omni_rl_rewards_remote.templates import template_problem

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,63}$")
PARSERS: tuple[str, ...] = ("number", "yes_no", "scale_1_5", "ocr")
#: how a judge's answer becomes a score: its text parsed, or the probability of "yes" from its log-probs
SCORINGS: tuple[str, ...] = ("parse", "yes_prob")


def _http_url(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if not value.startswith(("http://", "https://")):
        raise ValueError(f"{attribute.name} must be an http:// or https:// URL, got {value!r}")


def _optional_http_url(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    if value:
        _http_url(instance, attribute, value)


def _server(instance: Any, attribute: attrs.Attribute, value: ManagedServerConfig | None) -> None:
    """``server`` and ``base_url`` are the two ways to reach the judge: exactly one of them."""
    if value is None and not instance.base_url:
        raise ValueError(
            'set base_url (a server you run) or server = { engine = "vllm", model = ... } (one omni-rl runs)'
        )
    if value is not None and instance.base_url:
        raise ValueError("set base_url or server, not both: a managed server's address is chosen when it starts")
    if value is not None and instance.api_key_env:
        raise ValueError("api_key_env is for a server you run: a managed server gets a new API key every run")
    if value is None and not instance.model:
        raise ValueError("model must name the model the server at base_url serves")


def _env_name(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    # never echo the value: a user who pasted the key itself here must not see it printed in the error
    if value and not _ENV_NAME.match(value):
        raise ValueError(
            f"{attribute.name} must be the NAME of an environment variable holding the API key (upper case, digits "
            """and '_', e.g. "OPENAI_API_KEY"), never the key itself; export the key in that variable"""
        )


def _range(instance: Any, attribute: attrs.Attribute, value: tuple[float, float]) -> None:
    low, high = value
    if not (math.isfinite(low) and math.isfinite(high) and low < high):
        raise ValueError(f"{attribute.name} must be [low, high] with low < high, got {list(value)!r}")


#: frames one judge request may carry: a bound on mistakes (servers cap the images of a prompt, e.g. vLLM's
#: --limit-mm-per-prompt)
MAX_VIDEO_FRAMES = 64
_FRAME_COUNT = int_between(
    0, MAX_VIDEO_FRAMES, hint="0 judges each frame as an image, k > 0 sends k frames of each video in one request"
)


def _template(instance: Any, attribute: attrs.Attribute, value: str) -> None:
    problem = template_problem(value, instance.parser, instance.score)  # AttributeError without an instance: later
    if problem is not None:
        raise ValueError(problem)


@attrs.frozen(kw_only=True)
class RetryOptions:
    """What both remote rewards share: timeouts and retries with exponential back-off."""

    #: seconds to wait for a connection or for the server's reply (per attempt)
    timeout_s: float = attrs.field(default=60.0, converter=float, validator=positive_finite)
    #: further attempts after a failed one (connection error, timeout, HTTP 429 or 5xx); other errors are final
    max_retries: int = attrs.field(default=3, validator=non_negative_int)
    #: wait before retry k (from 0): backoff_s * 2**k, at most max_backoff_s (a 429's Retry-After is honoured)
    backoff_s: float = attrs.field(default=1.0, converter=float, validator=non_negative_finite)
    max_backoff_s: float = attrs.field(default=30.0, converter=float, validator=non_negative_finite)
    #: requests in flight at once (threads)
    concurrency: int = attrs.field(default=8, validator=positive_int)
    #: environment variable holding a bearer token sent as ``Authorization: Bearer ...`` ("" = none)
    api_key_env: str = attrs.field(default="", validator=_env_name)


@attrs.frozen(kw_only=True)
class VlmJudgeConfig(RetryOptions):
    """Options of ``vlm_judge``: one chat completion per image, its reply parsed into a score in [0, 1]."""

    #: the server's OpenAI-compatible API root, e.g. "http://localhost:8000/v1" (vLLM, SGLang, OpenAI); "" with
    #: ``server``
    base_url: str = attrs.field(default="", validator=_optional_http_url)
    #: the model name the server knows, e.g. "CodeGoat24/UnifiedReward-qwen-7b" ("" with ``server``: its model)
    model: str = ""
    #: a preset ("alignment", "quality", "matches", "ocr"; docs/rewards.md) or your own template with {prompt}
    template: str = attrs.field(default="alignment", validator=_template)
    #: how the reply becomes a score ("" = the preset's): "number" in number_range, "yes_no", "scale_1_5",
    #: or "ocr" (the reply is the text read; scored with the ocr reward's formula against the quoted target)
    parser: Literal["", "number", "yes_no", "scale_1_5", "ocr"] = attrs.field(
        default="", validator=attrs.validators.in_(("", *PARSERS))
    )
    #: the range the "number" parser maps linearly onto [0, 1] (a reply outside it is a failure)
    number_range: tuple[float, float] = attrs.field(default=(0.0, 10.0), validator=_range)
    #: a system message sent first ("" = none)
    system_prompt: str = ""
    max_tokens: int = attrs.field(default=512, validator=positive_int)
    temperature: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)
    #: video models: 0 = each frame judged as an image (the [[reward]] section's aggregate makes the video's
    #: score); k > 0 = each video judged whole, k of its frames (evenly spaced, first and last included) sent in
    #: time order in one request, so the judge sees the motion
    video_frames: int = attrs.field(default=0, validator=_FRAME_COUNT)
    #: edits and image-to-video: each sample's condition image(s) ("Source image:") go first, then the output
    #: ("Edited image:"), in one message (the edit_* presets always send them)
    with_source: bool = False
    #: "parse": the reply's text read by the parser; "yes_prob": P(yes) / (P(yes) + P(no)) over the top-20 log-probs
    #: of a one-token answer (the server must return log-probs: vLLM, SGLang), for a yes/no template
    score: Literal["parse", "yes_prob"] = attrs.field(default="parse", validator=attrs.validators.in_(SCORINGS))
    #: a judge omni-rl serves for the run instead of ``base_url``: ``{ engine = "vllm", model = "PATH_OR_ID", gpus =
    #: 1, replicas = 1, args = [...] }`` (omni_rl_rewards_remote.managed; docs/rewards.md, "Managed servers")
    server: ManagedServerConfig | None = attrs.field(default=None, validator=_server)


@attrs.frozen(kw_only=True)
class HttpRewardConfig(RetryOptions):
    """Options of ``http``: a reward served by ``omni-rl serve-reward`` (or any server of the same protocol)."""

    #: the reward's URL, as serve-reward prints it, e.g. "http://127.0.0.1:8000/shapes"
    url: str = attrs.field(validator=_http_url)
    #: "png" (lossless, compact: across a network) or "raw" (uint8 bytes: no encoding cost on a fast link)
    image_encoding: Literal["png", "raw"] = attrs.field(default="png", validator=attrs.validators.in_(("png", "raw")))
    #: images per request (0 = the whole batch in one request); several requests go out concurrently
    batch_size: int = attrs.field(default=0, validator=non_negative_int)
    #: video models: false = the run sends each video's frames as images (the [[reward]] aggregate makes the
    #: video's score); true = the served reward scores whole videos (its GET says "scores_video": true) and gets
    #: them as they are, (N, F, H, W, 3)
    scores_video: bool = False
    #: edits: send each sample's condition images (an edit's sources) with it, for a served reward that reads them
    #: (its GET says "reads_conditions": true; a server refuses them, naming this option, for one that does not)
    send_conditions: bool = False
    timeout_s: float = attrs.field(default=300.0, converter=float, validator=positive_finite)
    max_retries: int = attrs.field(default=2, validator=non_negative_int)
    concurrency: int = attrs.field(default=4, validator=positive_int)
