"""Several weighted rewards as one score, with every sub-score kept for logging.

The combined score is ``sum_k weight_k * score_k``. A reward that raises stops the run with an error naming it,
unless its section sets ``on_error = "zero"``: then that reward scores the batch 0 and the failure is counted in
``reward/<name>/failures``. A reward may also report samples it scored 0 itself after a failed call
(``RewardResult.failures``, e.g. a VLM judge whose API timed out): they are added to the same count.
NaN/inf scores are kept out of the statistics and counted in ``reward/<name>/nonfinite``; a wrong number of
scores is always an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import attrs
import numpy as np

from omni_rl.batch import RewardResult
from omni_rl.errors import RuntimeFailure
from omni_rl.faults import describe_remote
from omni_rl.schema import ResolvedComponent

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
    #: the means here and of the group statistics (omni_rl.advantages), counted in ``reward/<name>/nonfinite``
    nonfinite: dict[str, int] = attrs.field(factory=dict)

    def metrics(self, prefix: str = "reward") -> dict[str, float]:
        out = {f"{prefix}/mean": _finite_mean(self.total), f"{prefix}/std": _finite_std(self.total)}
        for name, score in self.scores.items():
            out[f"{prefix}/{name}/mean"] = _finite_mean(score)
            if self.nonfinite.get(name):
                out[f"{prefix}/{name}/nonfinite"] = float(self.nonfinite[name])
            for key, value in self.details[name].items():
                out[f"{prefix}/{name}/{key}"] = float(np.mean(value))
            if self.failures.get(name):
                out[f"{prefix}/{name}/failures"] = float(self.failures[name])
        return out


class CombinedReward:
    """Builds every ``[[reward]]`` once and scores batches with all of them."""

    def __init__(self, rewards: Sequence[ResolvedComponent], ctx: Any) -> None:
        self.sections = list(rewards)
        self.ctx = ctx
        self.models: list[Any] = [None if section.resources else section.build(ctx) for section in self.sections]
        self.names = _unique_names([section.name for section in self.sections])

    def close(self) -> None:
        """Kill the reward actors this run started (in-driver rewards need nothing)."""
        for k, section in enumerate(self.sections):
            if section.resources and self.models[k] is not None:
                import ray

                ray.kill(self.models[k])
                self.models[k] = None

    def actor_resources(self) -> list[dict[str, float]]:
        """What each reward actor asks Ray for (the run checks that the cluster has it before starting)."""
        return [actor_resources(section.resources) for section in self.sections if section.resources]

    def start(self) -> None:
        """Start every reward actor now, all at once, and wait until they hold their resources: a reward that
        cannot be placed fails the run before the first rollout, not after it."""
        import ray

        waiting = {}
        for k, section in enumerate(self.sections):
            if section.resources and self.models[k] is None:
                self.models[k] = self._start_actor(k)
                waiting[self.models[k].__ray_ready__.remote()] = k
        if not waiting:
            return
        # a reward that fails to build is not an error here: its first batch fails, as on_error says
        _, unplaced = ray.wait(list(waiting), num_returns=len(waiting), timeout=REWARD_ACTOR_TIMEOUT_S)
        if unplaced:
            self._unplaced(waiting[unplaced[0]])

    def _start_actor(self, k: int) -> Any:
        import ray

        resources = actor_resources(self.sections[k].resources)
        options = {"num_cpus": resources.pop("CPU"), "num_gpus": resources.pop("GPU")}
        return ray.remote(**options, resources=resources or None)(RewardActor).remote(self.sections[k], self.ctx)

    def _unplaced(self, k: int) -> NoReturn:
        import ray

        self.close()
        raise RuntimeFailure(
            f"reward {self.names[k]!r} could not get its resources {dict(self.sections[k].resources)} within "
            f"{REWARD_ACTOR_TIMEOUT_S} s (cluster has {ray.cluster_resources()}, free {ray.available_resources()})",
            hint="lower its [[reward]] resources or add nodes / GPUs to the cluster",
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

    def __call__(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> ScoredBatch:
        n = len(prompts)
        total = np.zeros(n, dtype=np.float64)
        scores, details, failures, weights, nonfinite = {}, {}, {}, {}, {}
        # Rewards with their own resources score in their actors while the driver scores the others.
        pending = {
            k: self._remote(k).score.remote(images, list(prompts), list(metadata))
            for k, section in enumerate(self.sections)
            if section.resources
        }
        for k, (name, section) in enumerate(zip(self.names, self.sections, strict=True)):
            try:
                if k in pending:
                    import ray

                    raw = ray.get(pending[k])
                else:
                    raw = self.models[k](images, prompts, metadata)
                result = RewardResult.coerce(raw)
                score = np.asarray(result.scores, dtype=np.float64).reshape(-1)
            except Exception as exc:
                if section.on_error != "zero":
                    where = f"reward actor {name!r}" if k in pending else f"reward {name!r}"
                    raise RuntimeFailure(
                        f"{where} failed: {describe_remote(exc)}",
                        hint=f'fix the reward, or set on_error = "zero" in its [[reward]] section to score '
                        f"failed batches 0 (counted in reward/{name}/failures)",
                    ) from exc
                failures[name] = failures.get(name, 0) + 1
                result, score = RewardResult(np.zeros(n)), np.zeros(n)
            if score.shape != (n,):  # a bug in the reward, not a failed batch: on_error does not cover it
                raise RuntimeFailure(
                    f"reward {name!r} returned {score.size} scores for {n} images",
                    hint="a reward returns one score per image, in the order of the images it was given",
                )
            if not np.all(np.isfinite(score)):
                nonfinite[name] = int(np.sum(~np.isfinite(score)))
            if result.failures:  # samples the reward itself scored 0 after a failed call (a remote judge)
                failures[name] = failures.get(name, 0) + int(result.failures)
            scores[name] = score
            weights[name] = float(section.weight)
            details[name] = {k: np.asarray(v, dtype=np.float64) for k, v in result.details.items()}
            total += section.weight * score
        return ScoredBatch(
            total=total, scores=scores, details=details, failures=failures, weights=weights, nonfinite=nonfinite
        )


class RewardActor:
    """Holds one reward model inside a Ray actor (its own CPUs/GPUs, e.g. a PickScore or OCR model)."""

    def __init__(self, section: ResolvedComponent, ctx: Any) -> None:
        self.model = section.build(actor_context(ctx, section.resources))

    def score(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> RewardResult | np.ndarray:
        return self.model(images, prompts, metadata)


def actor_resources(resources: Mapping[str, float]) -> dict[str, float]:
    """A ``[[reward]] resources`` table as the actor's Ray request: 1 CPU and no GPU unless it says otherwise."""
    out = {"CPU": 1.0, "GPU": 0.0}
    out.update({key: float(value) for key, value in resources.items()})
    return out


def actor_context(ctx: Any, resources: Mapping[str, float]) -> Any:
    """The build context inside a reward actor: an actor given GPUs builds its model on ``cuda`` (Ray shows the
    actor only its own GPUs, so ``cuda`` is the first of those), not on the driver's CPU device."""
    if actor_resources(resources)["GPU"] <= 0:
        return ctx
    from omni_rl.context import BuildContext

    return attrs.evolve(ctx, device="cuda") if isinstance(ctx, BuildContext) else BuildContext(device="cuda")


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
