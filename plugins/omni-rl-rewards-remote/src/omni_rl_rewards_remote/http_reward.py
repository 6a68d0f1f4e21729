"""``http``: a reward scored by a reward server (``omni-rl serve-reward``, or any server of the same protocol).

The batch goes out in requests of ``batch_size`` images (all at once by default), ``concurrency`` of them in
flight, each with its timeout and retries. On a video model the core hands it each video's frames as images
(omni_rl.rewards.frames), unless ``scores_video`` says the served reward scores whole videos: then it declares
``scores_video`` itself and sends the videos (N, F, H, W, 3) as they are. With ``send_conditions`` (a served
reward that reads an edit's sources: its GET says ``"reads_conditions": true``) it declares ``reads_conditions``,
so the core hands it each sample's condition images, and sends them with the sample (PNG, each distinct image
once per request, whatever ``image_encoding`` says).

A server that stays unreachable fails the whole batch with its URL named: the section's ``on_error`` then
decides between stopping the run (with the resume command) and scoring the batch 0 with the failure counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from omni_rl.batch import RewardResult, check_reward_images
from omni_rl.errors import RuntimeFailure
from omni_rl.rewards.protocol import ProtocolError, decode_response, encode_request
from omni_rl_rewards_remote.config import HttpRewardConfig
from omni_rl_rewards_remote.secrets import auth_headers, key_kept_out, read_api_key, redact
from omni_rl_rewards_remote.transport import RemoteCallError, Retry, post_json


class HttpReward:
    """Scores images by POSTing them to ``options.url`` (see the module docstring)."""

    def __init__(self, config: HttpRewardConfig, *, post: Callable[..., Any] = post_json) -> None:
        self.config = config
        self.retry = Retry.of(config)
        self._post = post
        #: whole videos come as they are, to a server whose reward scores them (omni_rl.rewards.frames)
        self.scores_video = config.scores_video
        if config.send_conditions:  # only then: the core hands it each sample's sources (omni_rl.rewards.frames)
            self.reads_conditions = True
        read_api_key(config.api_key_env, "http")

    def __repr__(self) -> str:
        return f"HttpReward(url={self.config.url!r})"

    def __call__(
        self,
        images: np.ndarray,
        prompts: Sequence[str],
        metadata: Sequence[Mapping[str, Any]],
        conditions: Sequence[tuple[np.ndarray, ...]] | None = None,
    ) -> RewardResult:
        array = check_reward_images(images, prompts, videos=self.scores_video)
        n = len(prompts)
        metadata = list(metadata) or [{} for _ in range(n)]
        sources: list[tuple[np.ndarray, ...]] | None = None
        if self.config.send_conditions:
            sources = list(conditions or []) or [() for _ in range(n)]
            if len(sources) != n:
                raise ValueError(f"the http reward got {len(sources)} samples' condition images for {n} images")
        size = self.config.batch_size or max(n, 1)
        chunks = [slice(start, min(start + size, n)) for start in range(0, n, size)]
        key = read_api_key(self.config.api_key_env, "http")
        if not chunks:
            return RewardResult(scores=np.zeros(0))
        with (
            key_kept_out(key, "http"),
            ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(chunks))) as pool,
        ):
            parts = list(
                pool.map(
                    lambda part: self._score(
                        array[part], prompts[part], metadata[part], None if sources is None else sources[part], key
                    ),
                    chunks,
                )
            )
        return RewardResult(
            scores=np.concatenate([p.scores for p in parts]),
            details={name: np.concatenate([p.details[name] for p in parts]) for name in parts[0].details},
            failures=sum(p.failures for p in parts),
        )

    def _score(
        self,
        images: np.ndarray,
        prompts: Sequence[str],
        metadata: Sequence[Mapping[str, Any]],
        sources: Sequence[tuple[np.ndarray, ...]] | None,
        key: str,
    ) -> RewardResult:
        body = encode_request(images, prompts, metadata, self.config.image_encoding, sources)
        url = self.config.url
        try:
            reply = self._post(url, body, retry=self.retry, headers=auth_headers(key), secret=key)
            return decode_response(reply, len(prompts))
        except RemoteCallError as exc:
            reason = redact(str(exc), key)
            raise RuntimeFailure(
                f"the reward server at {url} did not score the batch: {reason}",
                hint="check that the server is running (omni-rl serve-reward <serve config> prints its URL) and "
                'that options.url is right; set on_error = "zero" in the reward\'s section to keep training '
                "with failed batches scored 0 (counted in reward/<name>/failures)",
            ) from None
        except ProtocolError as exc:
            raise RuntimeFailure(
                f"the reward server at {url} answered outside the omni-rl reward protocol: {redact(str(exc), key)}",
                hint="point options.url at an omni-rl serve-reward endpoint or a server of the protocol in "
                "docs/rewards.md",
            ) from None


def build_http(config: HttpRewardConfig, ctx: Any) -> HttpReward:
    """Factory of ``http``."""
    return HttpReward(config)
