"""Start an embedded local Ray, or join an existing cluster named by ``[cluster] address``."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from omni_rl.config.schema import ClusterConfig
from omni_rl.errors import RuntimeFailure
from omni_rl.runtime.local_ray import embedded_init_options, prefer_loopback_node
from omni_rl.runtime.ray_auth import prepare_auth, protect_token_file
from omni_rl.runtime.ray_session_dir import (
    embedded_session_dir,
    mark_session_dir,
    remove_session_dir,
    remove_stale_session_dirs,
)
from omni_rl.runtime.ray_signals import init_keeping_handlers, rearm
from omni_rl.runtime.worker_logs import filter_worker_logs, plain_prefixes


@contextmanager
def ray_session(cluster: ClusterConfig, reward_actors: Sequence[Mapping[str, float]] = ()) -> Iterator[str]:
    """Connect to Ray for the duration of a run; shut down only what this call started.

    ``address = "local"`` starts an embedded single-machine cluster sized to fit the worker group and the reward
    actors (``reward_actors``: each one's Ray resources), or reuses a Ray this process already joined, as the
    test suite does; anything else is passed to ``ray.init(address=)`` (``"auto"``, ``"host:6379"``,
    ``"ray://host:10001"``). Either way the cluster is checked first to hold all of it. Yields a one-line
    description for the console.
    """
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    plain_prefixes()  # no ANSI colour around the workers' line prefixes under NO_COLOR or into a log file
    if cluster.address == "local":
        prefer_loopback_node()  # before Ray is imported: an embedded cluster listens on 127.0.0.1 (local_ray)
    import ray

    started = False
    description = "reusing the Ray this process already joined"
    if not ray.is_initialized():
        prepare_auth(cluster.address)
        kwargs = {
            "include_dashboard": False,
            "logging_level": logging.WARNING,
            "log_to_driver": True,
            "runtime_env": {"env_vars": worker_env()},
        }
        init = init_keeping_handlers(ray.init)  # a SIGTERM while Ray starts reaches the run's handler, not Ray's
        try:
            if cluster.address == "local":
                remove_stale_session_dirs()  # what killed runs left (their driver and Ray's agents gone)
                need = sum(count * max(bundle["CPU"], 1.0) for _, count, bundle in _worker_kinds(cluster))
                need += sum(actor.get("CPU", 0.0) for actor in reward_actors)
                # address="local" forces a new embedded cluster: a bare ray.init() would silently join any
                # cluster a `ray start` left running on this machine.
                init(
                    address="local",
                    num_cpus=max(int(need + 0.999), os.cpu_count() or 1),
                    **kwargs,
                    **embedded_init_options(),  # no Prometheus exporter on 0.0.0.0 (local_ray)
                )
                description = "started an embedded local Ray"
            else:
                init(address=cluster.address, **kwargs)
                description = f"joined the Ray cluster at {cluster.address}"
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RuntimeFailure(
                f"cannot connect to the Ray cluster at {cluster.address!r}: {exc}",
                hint="start one with `ray start --head` and set [cluster] address to the address it prints, "
                'or use address = "local" for an embedded cluster',
            ) from exc
        started = True
        protect_token_file()  # Ray wrote it 0644: anyone who reads it can run code in the cluster
        filter_worker_logs()
    session = embedded_session_dir() if started and cluster.address == "local" else None
    if session is not None:
        mark_session_dir(session)  # so that the next start can remove it if this run is killed
    try:
        _check_resources(cluster, reward_actors)
        yield f"{description} ({_resource_summary()})"
    finally:
        if started:
            ray.shutdown()
            rearm()  # shutdown reset SIGTERM's C-level action: a second signal now would kill without a word
        if session is not None:
            remove_session_dir(session)


#: Library chatter that would drown the progress bar in every worker's log; a user's own setting wins.
QUIET_WORKER_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "DIFFUSERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


def worker_env() -> dict[str, str]:
    """Environment for the worker processes: quiet libraries, and the user's HF offline / cache settings."""
    env = {key: os.environ.get(key, value) for key, value in QUIET_WORKER_ENV.items()}
    for key in ("HF_HUB_OFFLINE", "HF_HOME", "OMNI_RL_TORCH_THREADS", "OMNI_RL_PLACEMENT_GUARD"):
        if key in os.environ:
            env[key] = os.environ[key]
    return env


def _resource_summary() -> str:
    import ray

    total = ray.cluster_resources()
    return f"{total.get('CPU', 0):g} CPU, {total.get('GPU', 0):g} GPU, {len(ray.nodes())} node(s)"


def worker_bundle(cluster: ClusterConfig, rollout: bool = False) -> dict[str, float]:
    """One policy worker's Ray resources (a bundle of the worker group's placement group); ``rollout``: one
    rollout worker's, the policy workers' unless ``rollout_cpus_per_worker`` / ``rollout_gpus_per_worker`` are set."""
    cpus, gpus = cluster.cpus_per_worker, cluster.gpus_per_worker
    if rollout:
        cpus = cpus if cluster.rollout_cpus_per_worker is None else cluster.rollout_cpus_per_worker
        gpus = gpus if cluster.rollout_gpus_per_worker is None else cluster.rollout_gpus_per_worker
    bundle = {"CPU": cpus}
    if gpus:
        bundle["GPU"] = gpus
    return bundle


def _worker_kinds(cluster: ClusterConfig) -> list[tuple[str, int, dict[str, float]]]:
    """(what the messages call them, how many, one's bundle) of the policy workers and the rollout workers."""
    kinds = [("worker(s)", cluster.workers, worker_bundle(cluster))]
    if cluster.rollout_workers:
        kinds.append(("rollout worker(s)", cluster.rollout_workers, worker_bundle(cluster, rollout=True)))
    return kinds


def _check_resources(cluster: ClusterConfig, reward_actors: Sequence[Mapping[str, float]] = ()) -> None:
    """Fail fast, naming what is missing, instead of waiting for actors that cannot be placed.

    Two checks: the cluster's totals cover the workers and the reward actors together, and each worker's bundle
    and each reward actor fits on one node (a worker cannot span nodes: 8 GPUs over two 4-GPU nodes is enough in
    total, but a worker of 8 GPUs fits nowhere)."""
    import ray

    wanted: dict[str, float] = {}
    for _, count, bundle in _worker_kinds(cluster):
        for key, value in bundle.items():
            wanted[key] = wanted.get(key, 0.0) + count * value
    for actor in reward_actors:
        for key, value in actor.items():
            wanted[key] = wanted.get(key, 0.0) + value
    total = ray.cluster_resources()
    missing = [
        f"{key}: need {need:g} ({_breakdown(key, cluster, reward_actors)}), cluster has {total.get(key, 0):g}"
        for key, need in wanted.items()
        if need > total.get(key, 0) + 1e-9
    ]
    nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive", True)]
    requests = [(f"each of the {count} {who}", bundle) for who, count, bundle in _worker_kinds(cluster)]
    requests += [(f"reward actor {k + 1}", dict(actor)) for k, actor in enumerate(reward_actors)]
    for who, request in requests:
        if nodes and not any(_fits(request, node) for node in nodes):
            largest = max(nodes, key=lambda node: tuple(node.get(key, 0) for key in request))
            missing.append(
                f"{who} needs {_fmt(request)} on one node, but no node has that "
                f"(the largest has {_fmt({key: largest.get(key, 0) for key in request})})"
            )
    if missing:
        raise RuntimeFailure(
            f"the Ray cluster cannot place the run: {'; '.join(missing)} (cluster: {_resource_summary()})",
            hint="lower [cluster] workers / cpus_per_worker / gpus_per_worker (rollout_workers / rollout_*_per_worker) "
            "or the [[reward]] resources, or add nodes with those resources to the cluster",
        )


def _fits(request: Mapping[str, float], node: Mapping[str, float]) -> bool:
    return all(value <= node.get(key, 0) + 1e-9 for key, value in request.items() if value > 0)


def _fmt(resources: Mapping[str, float]) -> str:
    return ", ".join(f"{value:g} {key}" for key, value in resources.items() if value > 0) or "nothing"


def _breakdown(key: str, cluster: ClusterConfig, reward_actors: Sequence[Mapping[str, float]]) -> str:
    """``2 workers x 1`` plus the reward actors' share, for the error message."""
    parts = []
    for who, count, bundle in _worker_kinds(cluster):
        if bundle.get(key, 0):
            parts.append(f"{count} {who} x {bundle[key]:g}")
    rewards = sum(actor.get(key, 0.0) for actor in reward_actors)
    if rewards:
        parts.append(f"reward actors {rewards:g}")
    return " + ".join(parts)
