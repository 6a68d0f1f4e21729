"""The Ray Serve deployment that holds one reward model and answers the reward protocol over HTTP.

Requests that arrive within ``batch_wait_timeout_s`` of each other are merged (``@serve.batch``) into one call
of the reward, so a GPU reward model scores one large batch instead of many small ones, while each client
gets its own scores back. Imports Ray Serve at module level: import this module only to start a server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from omni_rl.batch import RewardResult
from omni_rl.config.schema import ResolvedComponent
from omni_rl.context import BuildContext
from omni_rl.rewards.combined import actor_context
from omni_rl.rewards.frames import call_reward, reads_conditions, scores_video
from omni_rl.rewards.protocol import Conditions, encode_response
from omni_rl.serving.limits import ServeLimits, answer


@attrs.frozen
class Job:
    """One request's batch, as it waits to be merged with others."""

    images: np.ndarray
    prompts: list[str]
    metadata: list[dict[str, Any]]
    #: each sample's condition images, for a reward that reads them (empty: none sent)
    conditions: Conditions = attrs.field(factory=list)

    def sample_conditions(self) -> Conditions:
        """One tuple per sample: the job's, or empty ones when it sent none (so merged jobs stay aligned)."""
        return list(self.conditions) or [() for _ in self.prompts]


def score_jobs(model: Any, jobs: Sequence[Job]) -> list[RewardResult | Exception]:
    """Score every job, merging those whose images share a size into one call; a merged call that fails is
    retried job by job, so one bad request does not fail the others it was merged with.

    A merged call's ``failures`` count is reported on the first job of the merge (it cannot be split by job).
    """
    results: list[RewardResult | Exception | None] = [None] * len(jobs)
    by_size: dict[tuple[int, ...], list[int]] = {}
    for i, job in enumerate(jobs):
        by_size.setdefault(tuple(job.images.shape[1:]), []).append(i)
    for members in by_size.values():
        try:
            merged = _call(
                model,
                np.concatenate([jobs[i].images for i in members]),
                [p for i in members for p in jobs[i].prompts],
                [m for i in members for m in jobs[i].metadata],
                [c for i in members for c in jobs[i].sample_conditions()],
            )
        except Exception:
            for i in members:
                results[i] = _call_or_error(model, jobs[i])
            continue
        start = 0
        for k, i in enumerate(members):
            stop = start + len(jobs[i].prompts)
            results[i] = RewardResult(
                scores=merged.scores[start:stop],
                details={name: values[start:stop] for name, values in merged.details.items()},
                failures=merged.failures if k == 0 else 0,
            )
            start = stop
    return [r if r is not None else RuntimeError("not scored") for r in results]


def _call(
    model: Any,
    images: np.ndarray,
    prompts: list[str],
    metadata: list[Mapping[str, Any]],
    conditions: Conditions,
) -> RewardResult:
    # conditions= only for a reward that reads them (a replica refuses them for another before decoding)
    result = RewardResult.coerce(call_reward(model, images, prompts, metadata, conditions))
    scores = np.asarray(result.scores, dtype=np.float64).reshape(-1)
    if scores.shape != (len(prompts),):
        raise ValueError(f"the reward returned {scores.shape[0]} scores for {len(prompts)} images")
    details = {k: np.asarray(v, dtype=np.float64).reshape(-1) for k, v in result.details.items()}
    return RewardResult(scores=scores, details=details, failures=int(result.failures))


def _call_or_error(model: Any, job: Job) -> RewardResult | Exception:
    try:
        return _call(model, job.images, job.prompts, job.metadata, job.sample_conditions())
    except Exception as exc:
        return exc


@serve.deployment
class RewardReplica:
    """One copy of a reward model behind ``/<route>``: ``POST`` scores, ``GET`` describes the endpoint."""

    def __init__(
        self,
        component: ResolvedComponent,
        max_batch_size: int,
        batch_wait_timeout_s: float,
        limits: ServeLimits | None = None,
    ) -> None:
        # with a token: its salted digest only (omni_rl.serving.token), so nothing Ray holds or logs is the secret
        self.limits = limits or ServeLimits()
        # a replica given GPUs builds on "cuda", its own first GPU, as a reward actor of a run does
        self.model = component.build(actor_context(BuildContext(), component.resources))
        self.name = component.name
        #: what GET says and what a request may hold: videos (N, F, H, W, 3) for a reward that scores them,
        #: condition images (an edit's sources) for one that reads them
        self.describe = {
            "reward": self.name,
            "scores_video": scores_video(self.model),
            "reads_conditions": reads_conditions(self.model),
        }
        self.score.set_max_batch_size(max_batch_size)
        self.score.set_batch_wait_timeout_s(batch_wait_timeout_s)

    async def __call__(self, request: Request) -> JSONResponse:
        status, document = await answer(
            request.method,
            request.headers,
            request.stream(),
            self.limits,
            self.describe,
            self._score_job,
        )
        return JSONResponse(document, status_code=status)

    async def _score_job(
        self, images: np.ndarray, prompts: list[str], metadata: list[dict[str, Any]], conditions: Conditions
    ) -> dict:
        result = await self.score(Job(images, prompts, metadata, conditions))
        if isinstance(result, Exception):
            raise result
        return encode_response(result)

    @serve.batch(max_batch_size=8, batch_wait_timeout_s=0.01)
    async def score(self, jobs: list[Job]) -> list[RewardResult | Exception]:
        # in a thread: the event loop keeps accepting (and batching) requests while the model scores
        return await asyncio.to_thread(score_jobs, self.model, jobs)
