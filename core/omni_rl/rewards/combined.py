"""Several weighted rewards as one score, with every sub-score kept for logging.

The combined score is ``sum_k weight_k * score_k``. A reward that raises stops the run with an error naming it,
unless its section sets ``on_error = "zero"``: then that reward scores the batch 0 and the failure is counted in
``reward/<name>/failures``. A reward may also report samples it scored 0 itself after a failed call
(``RewardResult.failures``, e.g. a VLM judge whose API timed out): they are added to the same count.
NaN/inf scores are kept out of the statistics and counted in ``reward/<name>/nonfinite``; a wrong number of
scores is always an error.

Streaming (``[run] stream_rewards``): the rewards with their own actors may be handed a training batch part by
part while it is still sampling (:meth:`CombinedReward.submit_parts`, one call per worker's part, started by Ray
when that part is ready); :meth:`CombinedReward.__call__` then gathers those calls and joins them in the batch's
order instead of scoring the whole batch, so a reward that scores each image on its own gives the same numbers.
A failed part counts as one failure, as a failed whole batch does.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any, NoReturn

import attrs
import numpy as np

from omni_rl.batch import RewardResult
from omni_rl.config.schema import ResolvedComponent
from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import RolloutOutcome
from omni_rl.rewards.frames import FrameRewards
from omni_rl.runtime.faults import describe_remote, startup_error

#: how long a reward actor may wait for its resources before the run fails (instead of hanging)
REWARD_ACTOR_TIMEOUT_S = 120


@attrs.define
class ScoredBatch:
    """The combined score and per-reward scores/details of N samples."""

    total: np.ndarray
    scores: dict[str, np.ndarray]
    details: dict[str, dict[str, np.ndarray]]
    failures: dict[str, int]
    #: each reward's weight in ``total`` (by the same names as ``scores``), for per-reward advantage aggregation
    weights: dict[str, float] = attrs.field(factory=dict)
    #: how many NaN/inf scores each reward returned: kept as they are (``total`` is non-finite there), left out of
    #: the means here and of the group statistics (omni_rl.train.advantages), counted in ``reward/<name>/nonfinite``
    nonfinite: dict[str, int] = attrs.field(factory=dict)
    #: how many samples each reward scored for real: finite, from a call that did not fail, less the samples
    #: the reward itself reported as failed. 0 means the step trains on nothing from it (omni_rl.rewards.health)
    valid: dict[str, int] = attrs.field(factory=dict)
    #: the first error of each reward whose call failed in this batch (``on_error = "zero"``), one line each
    errors: dict[str, str] = attrs.field(factory=dict)

    def metrics(self, prefix: str = "reward") -> dict[str, float]:
        out = {f"{prefix}/mean": _finite_mean(self.total), f"{prefix}/std": _finite_std(self.total)}
        for name, score in self.scores.items():
            out[f"{prefix}/{name}/mean"] = _finite_mean(score)
            if self.nonfinite.get(name):
                out[f"{prefix}/{name}/nonfinite"] = float(self.nonfinite[name])
            for key, value in self.details[name].items():
                # NaN marks a sample a sub-score does not apply to (geneval's per-tag scores): left out of the mean
                out[f"{prefix}/{name}/{key}"] = _finite_mean(np.asarray(value, dtype=np.float64))
            if self.failures.get(name):
                out[f"{prefix}/{name}/failures"] = float(self.failures[name])
        return out


@attrs.frozen
class StreamedScores:
    """Reward-actor calls submitted while a training batch was still sampling: for each reward with
    ``resources`` (by its index), one call per sampled part as (the part's positions in the batch, the Ray ref of
    its result). Passed to :meth:`CombinedReward.__call__`, they stand in for scoring those rewards on the whole
    batch."""

    size: int
    calls: dict[int, list[tuple[list[int], Any]]]


class CombinedReward:
    """Builds every ``[[reward]]`` once and scores batches with all of them."""

    def __init__(self, rewards: Sequence[ResolvedComponent], ctx: Any) -> None:
        self.sections = list(rewards)
        self.ctx = ctx
        self.models: list[Any] = [None if section.resources else _by_frames(section, ctx) for section in self.sections]
        self.names = _unique_names([section.name for section in self.sections])
        #: the batch being scored: each reward's first failed call (set by _part, read into ScoredBatch.errors)
        self._errors: dict[str, str] = {}

    @property
    def has_actors(self) -> bool:
        """Whether some reward runs in its own actor: only those can score a batch's parts while the rest of it
        still samples (an in-driver reward would block the driver, which has nothing else to wait on)."""
        return any(section.resources for section in self.sections)

    def close(self) -> None:
        """Kill the reward actors this run started, and close the in-driver rewards that hold something outside
        this process (a reward's optional ``close()``: e.g. the model servers a VLM judge started for the run)."""
        for k, section in enumerate(self.sections):
            if section.resources and self.models[k] is not None:
                import ray

                with contextlib.suppress(Exception):  # its own servers stopped before it goes (RewardActor.close)
                    ray.get(self.models[k].close.remote(), timeout=REWARD_ACTOR_TIMEOUT_S)
                ray.kill(self.models[k])
                self.models[k] = None
            elif not section.resources:
                _close(self.models[k])

    def actor_resources(self) -> list[dict[str, float]]:
        """What each reward actor asks Ray for (the run checks that the cluster has it before starting), and the
        Ray actors an in-driver reward will start (its optional ``ray_resources()``: a VLM judge's model servers)."""
        out = [actor_resources(section.resources) for section in self.sections if section.resources]
        for k, section in enumerate(self.sections):
            declared = None if section.resources else getattr(self.models[k], "ray_resources", None)
            if callable(declared):
                out += [actor_resources(resources) for resources in declared()]
        return out

    def start(self) -> None:
        """Start every reward actor now, all at once, and wait until they hold their resources: a reward that
        cannot be placed fails the run before the first rollout, not after it."""
        import ray

        for k, section in enumerate(self.sections):  # an in-driver reward's optional start() (its model servers)
            if not section.resources and callable(getattr(self.models[k], "start", None)):
                try:
                    self.models[k].start()
                except BaseException:
                    self.close()
                    raise
        waiting = {}
        for k, section in enumerate(self.sections):
            if section.resources and self.models[k] is None:
                self.models[k] = self._start_actor(k)
                waiting[self.models[k].__ray_ready__.remote()] = k
        if not waiting:
            return
        placed, unplaced = ray.wait(list(waiting), num_returns=len(waiting), timeout=REWARD_ACTOR_TIMEOUT_S)
        for ref in placed:  # a reward that fails to build stops the run now, as one in the driver does
            try:
                ray.get(ref)
            except ray.exceptions.RayError as exc:
                error = startup_error(exc, f"reward actor {self.names[waiting[ref]]!r}")
                if error is not None:
                    self.close()
                    raise error from exc
        if unplaced:
            self._unplaced(waiting[unplaced[0]])

    def _start_actor(self, k: int) -> Any:
        import ray

        options = ray_actor_options(self.sections[k].resources)
        return ray.remote(**options)(RewardActor).remote(self.sections[k], self.ctx)

    def _unplaced(self, k: int) -> NoReturn:
        import ray

        self.close()
        raise RuntimeFailure(
            f"reward {self.names[k]!r} could not get its resources {dict(self.sections[k].resources)} within "
            f"{REWARD_ACTOR_TIMEOUT_S} s (cluster has {ray.cluster_resources()}, free {ray.available_resources()})",
            hint=f"lower the resources of {_section(self.sections[k])} or add nodes / GPUs to the cluster",
        )

    def _remote(self, k: int) -> Any:
        """The Ray actor of a reward with its own resources (started by :meth:`start`, or here on first use)."""
        if self.models[k] is None:
            import ray

            actor = self._start_actor(k)
            ready, _ = ray.wait([actor.__ray_ready__.remote()], timeout=REWARD_ACTOR_TIMEOUT_S)
            self.models[k] = actor
            if not ready:
                self._unplaced(k)
        return self.models[k]

    def submit_parts(
        self,
        parts: Sequence[tuple[Sequence[int], Any]],
        metadata: Sequence[Mapping[str, Any]],
        conditions: Sequence[tuple[np.ndarray, ...]] | None = None,
    ) -> StreamedScores:
        """Queue each reward actor's scoring of every part of a batch that is still sampling, and return at once.

        ``parts``: (positions in the batch, the Ray ref of a worker's rollout output: a dict with ``images`` and
        ``prompts`` of those positions). Ray starts each call when its part is sampled, and the images go from the
        worker to the actor without passing through the driver; an actor scores the parts in the order given.
        ``metadata`` and ``conditions``: the whole batch's, one per sample (or empty)."""
        calls: dict[int, list[tuple[list[int], Any]]] = {}
        for k, section in enumerate(self.sections):
            if not section.resources:
                continue
            actor = self._remote(k)
            calls[k] = []
            for positions, ref in parts:
                meta = [metadata[i] for i in positions] if metadata else [{} for _ in positions]
                cond = [conditions[i] for i in positions] if conditions else None
                calls[k].append((list(positions), actor.score_part.remote(ref, meta, cond)))
        return StreamedScores(size=sum(len(positions) for positions, _ in parts), calls=calls)

    def __call__(
        self,
        images: np.ndarray,
        prompts: Sequence[str],
        metadata: Sequence[Mapping[str, Any]],
        streamed: StreamedScores | None = None,
        conditions: Sequence[tuple[np.ndarray, ...]] | None = None,
    ) -> ScoredBatch:
        """Score ``images`` with every reward; ``streamed``: the actor rewards' calls already submitted part by
        part for this batch (:meth:`submit_parts`), gathered here instead of scoring the whole batch again;
        ``conditions``: each sample's condition images, given to the rewards that read them (``reads_conditions``)."""
        n = len(prompts)
        total = np.zeros(n, dtype=np.float64)
        scores, details, failures, weights, nonfinite, valid = {}, {}, {}, {}, {}, {}
        self._errors = {}
        # Rewards with their own resources score in their actors while the driver scores the others.
        if streamed is not None:
            if streamed.size != n:
                raise AssertionError(f"streamed reward calls cover {streamed.size} samples, the batch has {n}")
            pending = streamed.calls
        else:
            pending = {
                k: [(list(range(n)), self._remote(k).score.remote(images, list(prompts), list(metadata), conditions))]
                for k, section in enumerate(self.sections)
                if section.resources
            }
        for k, (name, section) in enumerate(zip(self.names, self.sections, strict=True)):
            if k in pending:
                parts = [
                    (positions, self._part(k, len(positions), partial(_ray_get, ref))) for positions, ref in pending[k]
                ]
            else:
                given = (conditions,) if conditions else ()  # text-only batches call the reward as before
                call = partial(self.models[k], images, prompts, metadata, *given)
                parts = [(list(range(n)), self._part(k, n, call))]
            score, result_details, failed, valid[name] = _join(name, parts, n)
            if not np.all(np.isfinite(score)):
                nonfinite[name] = int(np.sum(~np.isfinite(score)))
            if failed:  # failed calls scored 0 (on_error = "zero"), and samples the reward itself scored 0
                failures[name] = failed
            scores[name] = score
            weights[name] = float(section.weight)
            details[name] = result_details
            total += section.weight * score
        return ScoredBatch(
            total=total,
            scores=scores,
            details=details,
            failures=failures,
            weights=weights,
            nonfinite=nonfinite,
            valid=valid,
            errors=dict(self._errors),
        )

    def _part(self, k: int, size: int, call: Callable[[], Any]) -> tuple[RewardResult, np.ndarray, int]:
        """Reward ``k``'s result for one call of ``size`` samples (``call()``: the whole batch, or one streamed
        part): (result, scores, 1 if the call failed and ``on_error = "zero"`` scored it 0). Any other failure,
        and a wrong number of scores, stop the run."""
        name, section = self.names[k], self.sections[k]
        try:
            result = RewardResult.coerce(call())
            score = np.asarray(result.scores, dtype=np.float64).reshape(-1)
        except (Exception, SystemExit) as exc:  # a reward calling sys.exit must not end the run without a word
            where = f"reward actor {name!r}" if section.resources else f"reward {name!r}"
            reason = describe_remote(exc)
            if isinstance(exc, SystemExit):
                reason += " (the reward called sys.exit)"
            if section.on_error != "zero":
                raise RuntimeFailure(
                    f"{where} failed: {reason}",
                    hint=f'fix the reward, or set on_error = "zero" in {_section(section)} to score failed batches 0 '
                    f"(counted in {_metric_prefix(section)}/{name}/failures)",
                ) from exc
            self._errors.setdefault(name, reason)
            return RewardResult(np.zeros(size)), np.zeros(size), 1
        if score.shape != (size,):  # a bug in the reward, not a failed batch: on_error does not cover it
            raise RuntimeFailure(
                f"reward {name!r} returned {score.size} scores for {size} images",
                hint="a reward returns one score per image, in the order of the images it was given",
            )
        return result, score, 0


class RewardActor:
    """Holds one reward model inside a Ray actor (its own CPUs/GPUs, e.g. a PickScore or OCR model)."""

    def __init__(self, section: ResolvedComponent, ctx: Any) -> None:
        self.model = _by_frames(section, actor_context(ctx, section.resources))

    def close(self) -> None:
        """The reward's optional ``close()`` (its model servers), before the run kills this actor."""
        _close(self.model)

    def score(
        self,
        images: np.ndarray,
        prompts: Sequence[str],
        metadata: Sequence[Mapping[str, Any]],
        conditions: Sequence[tuple[np.ndarray, ...]] | None = None,
    ) -> RewardResult | np.ndarray:
        return self.model(images, prompts, metadata, conditions)

    def score_part(
        self,
        part: RolloutOutcome,
        metadata: Sequence[Mapping[str, Any]],
        conditions: Sequence[tuple[np.ndarray, ...]] | None = None,
    ) -> RewardResult | np.ndarray:
        """Score one worker's part of a batch that is still sampling (``part``: its rollout outcome, which Ray
        resolved from the worker's object once it was sampled)."""
        return self.model(part.images, part.prompts, metadata, conditions)


def _by_frames(section: ResolvedComponent, ctx: Any) -> FrameRewards:
    """The section's reward, scoring videos frame by frame unless it scores videos itself (omni_rl.rewards.frames)."""
    return FrameRewards(section.build(ctx), getattr(section, "aggregate", "mean"))


def _close(model: Any) -> None:
    """A reward's optional ``close()``; a failing one must not hide the run's own outcome."""
    close = getattr(model, "close", None)
    if callable(close):
        try:
            close()
        except Exception as exc:
            import logging

            logging.getLogger(__name__).warning("closing a reward failed: %s", exc)


def _ray_get(ref: Any) -> Any:
    import ray

    return ray.get(ref)


def _valid(result: RewardResult, score: np.ndarray, failed: int) -> int:
    """Samples of one call scored for real: none of a failed call; else the finite ones less those the reward
    reported as failed itself (it scored them 0, which is finite)."""
    return 0 if failed else max(int(np.isfinite(score).sum()) - int(result.failures), 0)


def _join(
    name: str, parts: Sequence[tuple[list[int], tuple[RewardResult, np.ndarray, int]]], n: int
) -> tuple[np.ndarray, dict[str, np.ndarray], int, int]:
    """One reward's calls as the whole batch's (scores, details, failures, valid samples): each part's values
    placed at its positions. A detail is kept when every part has it; a part's scalar detail stands for each of
    its samples."""
    if len(parts) == 1 and parts[0][0] == list(range(n)):  # the whole batch in one call: as it is
        result, score, failed = parts[0][1]
        return (
            score,
            {key: np.asarray(v, dtype=np.float64) for key, v in result.details.items()},
            failed + int(result.failures),
            _valid(result, score, failed),
        )
    score = np.empty(n, dtype=np.float64)
    keys = set.intersection(*(set(result.details) for _, (result, _, _) in parts))
    details = {key: np.empty(n, dtype=np.float64) for key in sorted(keys)}
    failed = valid = 0
    for positions, (result, part_score, part_failed) in parts:
        score[positions] = part_score
        failed += part_failed + int(result.failures)
        valid += _valid(result, part_score, part_failed)
        for key in keys:
            value = np.asarray(result.details[key], dtype=np.float64).reshape(-1)
            if value.size not in (1, len(positions)):
                raise RuntimeFailure(
                    f"reward {name!r} returned detail {key!r} with {value.size} values for {len(positions)} images",
                    hint="streamed scoring joins details per sample: return one value per image (or one number), "
                    "or set [run] stream_rewards = false",
                )
            details[key][positions] = value
    return score, details, failed, valid


def actor_resources(resources: Mapping[str, float]) -> dict[str, float]:
    """A ``[[reward]] resources`` table as the actor's Ray request: 1 CPU and no GPU unless it says otherwise."""
    out = {"CPU": 1.0, "GPU": 0.0}
    out.update({key: float(value) for key, value in resources.items()})
    return out


def ray_actor_options(resources: Mapping[str, float]) -> dict[str, Any]:
    """``ray.remote`` / Ray Serve ``ray_actor_options`` of a reward actor with these ``resources``."""
    rest = actor_resources(resources)
    options: dict[str, Any] = {"num_cpus": rest.pop("CPU"), "num_gpus": rest.pop("GPU")}
    if rest:  # custom Ray resources
        options["resources"] = rest
    return options


def actor_context(ctx: Any, resources: Mapping[str, float]) -> Any:
    """The build context inside a reward actor: an actor given GPUs builds its model on ``cuda`` (Ray shows the
    actor only its own GPUs, so ``cuda`` is the first of those), not on the driver's CPU device."""
    if actor_resources(resources)["GPU"] <= 0:
        return ctx
    from omni_rl.context import BuildContext

    return attrs.evolve(ctx, device="cuda") if isinstance(ctx, BuildContext) else BuildContext(device="cuda")


def _section(section: Any) -> str:
    """Where a reward's section is in the config (``$.eval_reward[0]``), for errors; its table when not known."""
    return getattr(section, "path", "") or "its [[reward]] section"


def _metric_prefix(section: Any) -> str:
    """``val`` for an ``[[eval_reward]]`` (scored at validation only), else ``reward``."""
    return "val" if getattr(section, "path", "").startswith("$.eval_reward") else "reward"


def _finite_mean(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else float("nan")


def _finite_std(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.std()) if finite.size else float("nan")


def _unique_names(names: list[str]) -> list[str]:
    """The same reward twice (with different options) is logged as name, name_2, ..."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out
