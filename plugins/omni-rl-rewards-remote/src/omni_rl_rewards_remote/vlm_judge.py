"""``vlm_judge``: a vision-language model served behind an OpenAI-compatible API scores each image.

One ``/chat/completions`` call per image (the image as a base64 PNG data URL in an ``image_url`` content part,
then the filled-in template as a ``text`` part), ``concurrency`` of them at a time, each with its timeout and
retries. Videos (N, F, H, W, 3): by default the core scores each frame as an image (omni_rl.rewards.frames); with
``video_frames = k`` the judge declares ``scores_video`` and sends k frames of each video, in time order, as k
``image_url`` parts of one message (how vLLM, SGLang and OpenAI take several images), after a line saying they
are one video's frames, so the verdict is the video's, motion included.

Edits (``with_source``, or an ``edit_*`` preset): the judge reads the source too. The message is "Source image:"
and the sample's condition image(s), then "Edited image:" and the output (or "Generated video:" and its frames),
then the template; the reward then declares ``reads_conditions`` and the core hands it each sample's sources.
``score = "yes_prob"`` asks for a one-token answer with its top log-probs and scores P(yes) / (P(yes) + P(no))
(:mod:`.logprobs`); a server that returns no log-probs fails the batch, naming the fix, rather than scoring 0.

With ``server = {...}`` the judge is served for the run by omni-rl (:mod:`.managed`): the servers start with the
run (:meth:`VlmJudgeReward.start`, or at the first call), the requests go to them with the run's own API key
(``concurrency`` per replica), a replica that died is started again, and :meth:`VlmJudgeReward.close` stops them.

A call that still fails scores that sample 0 and is counted (``RewardResult.failures``, logged as
``reward/<name>/failures``): a flaky judge costs some samples their signal, never the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from omni_rl.batch import RewardResult, check_reward_images
from omni_rl.errors import RuntimeFailure
from omni_rl.reporting.video_grids import frame_indices
from omni_rl.rewards.protocol import png_data_url
from omni_rl_rewards_remote.config import VlmJudgeConfig
from omni_rl_rewards_remote.logprobs import TOP_LOGPROBS, MissingLogprobs, yes_probability
from omni_rl_rewards_remote.parsers import ParseError, number_parser, ocr_text, parse_scale_1_5, parse_yes_no
from omni_rl_rewards_remote.secrets import auth_headers, key_kept_out, read_api_key, redact, redacted_excerpt
from omni_rl_rewards_remote.templates import resolve_template
from omni_rl_rewards_remote.transport import RemoteCallError, Retry, post_json

if TYPE_CHECKING:
    from omni_rl_rewards_remote.managed.pool import ServerPool

log = logging.getLogger(__name__)

PostJson = Callable[..., Any]
#: how much of an unexpected reply goes into the error text
_REPLY_CHARS = 200
#: what precedes the template when a video's frames are sent: the presets say "image", the judge sees several
VIDEO_PREAMBLE = (
    "The {k} images above are frames of one generated video, in time order from first to last. Judge the video "
    "as a whole, its motion included: read every mention of the image below as the video.\n"
)
#: the same for a video of one frame (or ``video_frames = 1``): there is no motion to judge
ONE_FRAME_PREAMBLE = "The image above is the first frame of a generated video: judge it as the video.\n"
#: the video preambles when the source comes first: "above" would take in the source
SOURCE_VIDEO_PREAMBLE = (
    'The {k} images after "Generated video:" are frames of one video generated from the source image, in time order '
    "from first to last. Judge the video as a whole, its motion included: read every mention of the edited image "
    "below as the video.\n"
)
SOURCE_ONE_FRAME_PREAMBLE = (
    'The image after "Generated video:" is the first frame of a video generated from the source image: judge it as '
    "the video.\n"
)
#: why a sample without a source cannot be judged against it, and what to change
NO_SOURCE = (
    "vlm_judge sends each output with its source image (options.with_source or an edit_* template), but sample {i} "
    "has none (a text-only batch): train an editing or image-to-video model on prompt rows with an `image` or "
    "`images` field (docs/editing.md), or set with_source = false and a template that does not ask about a source"
)


@attrs.frozen
class Verdict:
    """One image's outcome: its score, or the (key-free) reason it scored 0."""

    score: float
    error: str = ""


class VlmJudgeReward:
    """Scores images in [0, 1] by asking a VLM (see the module docstring)."""

    def __init__(
        self, config: VlmJudgeConfig, *, post: PostJson = post_json, name: str = "vlm_judge", log_dir: Any = None
    ) -> None:
        self.config = config
        self.template = resolve_template(config.template, config.parser, config.score)
        #: the judge's servers when omni-rl runs them (``server``), else None (``base_url``)
        self.servers: ServerPool | None = None
        if config.server is not None:
            from omni_rl_rewards_remote.managed.pool import ServerPool

            self.model_name = config.model or config.server.model or "judge"
            self.servers = ServerPool(config.server, name, self.model_name, log_dir)
            self.url = f"managed:{config.server.engine}:{config.server.model or config.server.command[0]}"
        else:
            self.model_name = config.model
            self.url = config.base_url.rstrip("/") + "/chat/completions"
        self.retry = Retry.of(config)
        self._post = post
        #: whole videos come as they are (k frames a request) instead of frame by frame (omni_rl.rewards.frames)
        self.scores_video = config.video_frames > 0
        #: the source image(s) go first in each message (an edit judged against its source)
        self.with_source = config.with_source or self.template.with_source
        if self.with_source:  # only then: the core hands it each sample's sources (omni_rl.rewards.frames)
            self.reads_conditions = True
        if self.servers is None:
            read_api_key(config.api_key_env, "vlm_judge")  # a missing key fails the build, not every call

    def __repr__(self) -> str:  # no key here either: it is never stored
        return f"VlmJudgeReward(url={self.url!r}, model={self.model_name!r}, template={self.config.template!r})"

    def start(self) -> None:
        """Start the managed servers now (the run calls this before its first rollout; nothing without them)."""
        if self.servers is not None:
            self.servers.start()

    def close(self) -> None:
        """Stop the managed servers (the run calls this when it ends, fails or is interrupted)."""
        if self.servers is not None:
            self.servers.close()

    def ray_resources(self) -> list[dict[str, float]]:
        """The Ray actors the managed servers will take (one per replica), for the run's resource check."""
        server = self.config.server
        if server is None:
            return []
        return [{"CPU": server.cpus, "GPU": server.gpus} for _ in range(server.replicas)]

    def _api_key(self) -> str:
        if self.servers is not None:
            return self.servers.api_key
        return read_api_key(self.config.api_key_env, "vlm_judge")

    def _send(self, body: dict[str, Any], key: str) -> Any:
        if self.servers is not None:
            return self.servers.post("/chat/completions", body, retry=self.retry, post=self._post)
        return self._post(self.url, body, retry=self.retry, headers=auth_headers(key), secret=key)

    def __call__(
        self,
        images: np.ndarray,
        prompts: Sequence[str],
        metadata: Sequence[Mapping[str, Any]],
        conditions: Sequence[tuple[np.ndarray, ...]] | None = None,
    ) -> RewardResult:
        array = self._frames_of(images, prompts)
        # OCR targets are parsed before any call: a prompt without quoted text is a data mistake, found at once
        scorers = [self._scorer(prompt) for prompt in prompts]
        sources = self._sources(conditions, len(array))  # a sample without its source, likewise
        if not len(array):
            return RewardResult(scores=np.zeros(0))
        if self.servers is not None:
            self.servers.start()  # at the first call where the run did not start them (a reward used on its own)
        key = self._api_key()
        jobs = zip(array, prompts, scorers, sources, strict=True)
        replicas = self.config.server.replicas if self.config.server is not None else 1
        with (
            key_kept_out(key, "vlm_judge"),
            ThreadPoolExecutor(max_workers=min(self.config.concurrency * replicas, len(array))) as pool,
        ):
            verdicts = list(pool.map(lambda job: self._judge(*job[:3], key, job[3]), jobs))
        failed = [v for v in verdicts if v.error]
        if failed:
            log.warning(
                "vlm_judge: %d of %d calls to %s failed (scored 0); first: %s",
                len(failed),
                len(verdicts),
                self.url,
                failed[0].error,
            )
        scores = np.array([v.score for v in verdicts], dtype=np.float64)
        return RewardResult(scores=scores, failures=len(failed))

    def _frames_of(self, images: Any, prompts: Sequence[str]) -> np.ndarray:
        """Images (N, H, W, 3), or with ``video_frames`` videos (N, F, H, W, 3) reduced to (N, k, H, W, 3)."""
        if np.ndim(images) == 5 and not self.scores_video:  # the core hands an image reward frames, never videos
            raise ValueError("vlm_judge scores videos whole only with options.video_frames > 0")
        array = check_reward_images(images, prompts, videos=self.scores_video)
        return array[:, frame_indices(array.shape[1], self.config.video_frames)] if array.ndim == 5 else array

    def _sources(self, conditions: Sequence[tuple[np.ndarray, ...]] | None, n: int) -> list[tuple[np.ndarray, ...]]:
        """Each sample's source images when they are sent (``with_source``), else empty tuples."""
        if not self.with_source:
            return [() for _ in range(n)]
        given = list(conditions or [])
        if n and not given:
            raise ValueError(NO_SOURCE.format(i=0))
        if len(given) != n:
            raise ValueError(f"vlm_judge got {len(given)} samples' condition images for {n} images")
        for i, sample in enumerate(given):
            if not len(sample):
                raise ValueError(NO_SOURCE.format(i=i))
        return [tuple(sample) for sample in given]

    def _scorer(self, prompt: str) -> Callable[[str], float]:
        parser = self.template.parser
        if parser == "ocr":
            from omni_rl_rewards.ocr_score import extract_target, ocr_reward

            target = extract_target(prompt)
            return lambda reply: ocr_reward(ocr_text(reply), target)
        if parser == "number":
            return number_parser(*self.config.number_range)
        return parse_scale_1_5 if parser == "scale_1_5" else parse_yes_no

    def _judge(
        self,
        image: np.ndarray,
        prompt: str,
        scorer: Callable[[str], float],
        key: str,
        sources: tuple[np.ndarray, ...] = (),
    ) -> Verdict:
        body = self.request_body(image, prompt, sources)
        try:
            reply = self._send(body, key)
            if self.config.score == "yes_prob":
                return Verdict(yes_probability(reply))
            # redacted before a parser quotes (and cuts) the reply in its error: a judge that echoes the key
            return Verdict(float(scorer(redact(reply_text(reply, key), key))))
        except (RemoteCallError, ParseError) as exc:
            return Verdict(0.0, redact(str(exc), key))
        except MissingLogprobs:  # the server cannot serve this scoring: every call would fail alike
            raise RuntimeFailure(
                f'vlm_judge options.score = "yes_prob" reads the answer\'s log-probs, but the server at {self.url} '
                "returned none; serve the judge where chat completions return logprobs (vLLM, SGLang) or set "
                'options.score = "parse"',
                hint="the request asked for logprobs = true, top_logprobs = 20, max_tokens = 1",
            ) from None

    def request_body(self, image: np.ndarray, prompt: str, sources: Sequence[np.ndarray] = ()) -> dict[str, Any]:
        """The chat-completions request for one image (H, W, 3), or one video's frames (k, H, W, 3) as k images
        after one another and the video preamble (standard OpenAI format: vLLM, SGLang, OpenAI); with
        ``sources``, "Source image:" and those first, then "Edited image:" (or "Generated video:") and the output.
        """
        text = self.template.text.replace("{prompt}", prompt)
        frames = [image] if image.ndim == 3 else list(image)
        if image.ndim == 4:
            several = len(frames) > 1
            if sources:
                preamble = SOURCE_VIDEO_PREAMBLE if several else SOURCE_ONE_FRAME_PREAMBLE
            else:
                preamble = VIDEO_PREAMBLE if several else ONE_FRAME_PREAMBLE
            text = preamble.replace("{k}", str(len(frames))) + text
        content: list[dict[str, Any]] = []
        if sources:
            content.append({"type": "text", "text": "Source image:" if len(sources) == 1 else "Source images:"})
            content += [_image_part(source) for source in sources]
            content.append({"type": "text", "text": "Edited image:" if image.ndim == 3 else "Generated video:"})
        content += [_image_part(frame) for frame in frames]
        content.append({"type": "text", "text": text})
        messages: list[dict[str, Any]] = []
        if self.config.system_prompt:
            messages.append({"role": "system", "content": self.config.system_prompt})
        messages.append({"role": "user", "content": content})
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": messages,
            "max_tokens": self.config.max_tokens,
            "temperature": self.config.temperature,
        }
        if self.config.score == "yes_prob":  # one answer token and its alternatives
            body.update(max_tokens=1, logprobs=True, top_logprobs=TOP_LOGPROBS)
        return body


def _image_part(image: np.ndarray) -> dict[str, Any]:
    """An ``image_url`` content part holding ``image`` inline as a PNG data URL."""
    return {"type": "image_url", "image_url": {"url": png_data_url(np.ascontiguousarray(image, dtype=np.uint8))}}


def reply_text(reply: Any, secret: str = "") -> str:
    """The assistant message's text of a chat-completions reply (a string, or a list of text parts); a reply
    of another shape is quoted in the error with ``secret`` redacted before the quote is cut."""
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        excerpt = redacted_excerpt(str(reply), secret, _REPLY_CHARS)
        raise ParseError(f"not a chat-completions reply (no choices[0].message.content): {excerpt}") from None
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
    if not isinstance(content, str):
        raise ParseError(f"the reply's message content is {type(content).__name__}, not text")
    return content


def build_vlm_judge(config: VlmJudgeConfig, ctx: Any) -> VlmJudgeReward:
    """Factory of ``vlm_judge`` (no GPU of its own: the model runs in the server; a managed server's log goes
    in the run directory's ``reward_servers/``)."""
    run_dir = getattr(ctx, "run_dir", None)
    return VlmJudgeReward(config, log_dir=Path(run_dir) / "reward_servers" if run_dir else None)
