"""The replicas of one managed reward server: started together, requests spread over them, a dead one restarted.

- **Start** (:meth:`ServerPool.start`): every replica at once, each a Ray actor on the resources asked for (on
  this node when the servers bind to loopback), then one wait for all of them. A replica that cannot be placed,
  exits, or is not ready within ``server.ready_timeout_s`` stops the others and fails the run with one line: the
  model, the address, the server's last error (its log's last lines in the hint). Without a Ray session (a
  reward used on its own) the servers run as child processes of this one.
- **Requests** (:meth:`ServerPool.post`): each to the replica with the fewest in flight; the judge's
  ``concurrency`` is per replica, and vLLM batches the requests in flight on each (continuous batching). A call
  that fails for a reason worth retrying (refused, reset, timed out, 5xx) after its own retries asks whether the
  replica still runs; a dead one is started again (at most ``server.max_restarts`` times in the run, then the
  reward fails naming the server's last error) and the call is sent once more.
- **Stop** (:meth:`ServerPool.close`): SIGTERM to each server, its process group killed after
  ``server.stop_timeout_s``, the actors killed. Called when the run ends, fails or is interrupted (the trainer
  closes its rewards in a ``finally``), and at interpreter exit; should all of that be skipped (SIGKILL), Ray ends
  the actors with their owner and each server's guard ends the server (:mod:`.guard`).

The API key is made here, once per run (``secrets.token_urlsafe``), handed to the servers in their environment
and to the judge's calls as a bearer token; it is in no config, log, repr or error.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import secrets
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from omni_rl.errors import RuntimeFailure
from omni_rl_rewards_remote.managed.config import ManagedServerConfig
from omni_rl_rewards_remote.managed.interrupt import SignalWatch
from omni_rl_rewards_remote.managed.process import ServerProcess, StartResult
from omni_rl_rewards_remote.transport import RemoteCallError, Retry, post_json

log = logging.getLogger(__name__)

#: seconds a Ray call to a replica's actor may take beyond the server's own timeouts
_ACTOR_MARGIN_S = 30.0
#: log lines a start failure shows in its hint
_HINT_LINES = 8


@attrs.define
class Replica:
    """One server: its handle (a Ray actor, or a local process), its API root, and how it fared."""

    index: int
    handle: Any
    log_path: str
    url: str = ""
    port: int = 0
    generation: int = 0
    restarts: int = 0
    in_flight: int = 0
    lock: threading.Lock = attrs.field(factory=threading.Lock)


class _LocalHandle:
    """A replica run as a child of this process (no Ray session): the actor's interface, synchronously."""

    def __init__(self, config: ManagedServerConfig, key: str, log_path: str, served_name: str) -> None:
        self.server = ServerProcess(config, key, Path(log_path), served_name)

    def start(self) -> StartResult:
        return self.server.start()

    def alive(self) -> bool:
        return self.server.serving()

    def stop(self) -> None:
        self.server.stop()

    def kill(self) -> None:
        self.server.stop()


class _RayHandle:
    """A replica's Ray actor (:class:`~.actor.ServerActor`), each call waited for with a timeout."""

    def __init__(self, config: ManagedServerConfig, key: str, log_path: str, served_name: str) -> None:
        import ray

        from omni_rl_rewards_remote.managed.actor import ServerActor

        # threaded (max_concurrency): a stop or a liveness check must not queue behind a start still waiting
        options: dict[str, Any] = {
            "num_cpus": config.cpus,
            "num_gpus": config.gpus,
            "max_restarts": 0,
            "max_concurrency": 4,
        }
        if config.loopback:  # the judge reaches a loopback server only from the same node: place it there
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            node = ray.get_runtime_context().get_node_id()
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
        self.config = config
        self.actor = ray.remote(**options)(ServerActor).remote(config, key, log_path, served_name)
        self.start_ref: Any = None

    def start(self) -> StartResult:
        import ray

        self.start_ref = self.actor.start.remote()
        return ray.get(self.start_ref, timeout=self.config.ready_timeout_s + _ACTOR_MARGIN_S)

    def placed(self) -> bool:
        import ray

        ready, _ = ray.wait([self.actor.__ray_ready__.remote()], timeout=0.5)
        return bool(ready)

    def alive(self) -> bool:
        import ray

        try:
            return bool(ray.get(self.actor.alive.remote(), timeout=_ACTOR_MARGIN_S))
        except (ray.exceptions.RayError, TimeoutError):
            return False

    def actor_alive(self) -> bool:
        """Whether the actor itself still answers (its server may have died; it may have, too)."""
        import ray

        try:
            ray.get(self.actor.pid.remote(), timeout=_ACTOR_MARGIN_S)
        except (ray.exceptions.RayError, TimeoutError):
            return False
        return True

    def stop(self) -> None:
        import ray

        # a dead actor's guard has stopped the server already
        with contextlib.suppress(ray.exceptions.RayError, TimeoutError):
            ray.get(self.actor.stop.remote(), timeout=self.config.stop_timeout_s + _ACTOR_MARGIN_S)

    def kill(self) -> None:
        import ray

        with contextlib.suppress(Exception):  # an actor already gone
            ray.kill(self.actor)


class ServerPool:
    """The servers of one reward (see the module docstring)."""

    def __init__(self, config: ManagedServerConfig, reward: str, served_name: str, log_dir: Path | None) -> None:
        self.config = config
        self.reward = reward
        self.served_name = served_name
        self._log_dir = Path(log_dir) if log_dir else None
        self.api_key = secrets.token_urlsafe(24)
        self.replicas: list[Replica] = []
        self._lock = threading.Lock()
        self._closed = False
        finalizer = weakref.WeakMethod(self.close)
        atexit.register(lambda: (close := finalizer()) and close())

    def __repr__(self) -> str:  # never the key
        return f"ServerPool(reward={self.reward!r}, model={self.config.model!r}, replicas={len(self.replicas)})"

    @property
    def log_dir(self) -> Path:
        """Where the servers' logs go: the run directory's ``reward_servers/``, else a temporary directory made at
        the first start (building the reward, as ``omni-rl check`` does, writes nothing)."""
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="omni-rl-reward-servers-"))
        return self._log_dir

    @property
    def started(self) -> bool:
        return bool(self.replicas)

    def where(self, replica: Replica | None = None) -> str:
        """``host:port`` of a replica (the first one by default), for messages."""
        port = replica.port if replica is not None else (self.replicas[0].port if self.replicas else 0)
        return f"{self.config.host}:{port or self.config.port or '<free port>'}"

    # -- start ------------------------------------------------------------------------------------------------
    def start(self) -> None:
        """Start every replica and wait until all are ready; any failure stops them all and raises."""
        with self._lock:
            if self.replicas:
                return
            self._closed = False
            began = time.monotonic()
            replicas = [self._new_replica(k) for k in range(self.config.replicas)]
            self.replicas = replicas
            with SignalWatch() as watch:
                results = self._start_all(replicas, watch.event)
            if watch.event.is_set():
                self._close_locked()
                raise watch.error(f"the {self.reward} reward's servers")
            failed = [(replica, result) for replica, result in zip(replicas, results, strict=True) if not result.ok]
            if failed:
                self._close_locked()
                # the replica that failed, not one stopped because of it
                failed.sort(key=lambda pair: not pair[1].error or pair[1].error.startswith("stopped:"))
                raise self._start_error(*failed[0])
            for replica, result in zip(replicas, results, strict=True):
                replica.url, replica.port = result.url, result.port
            log.info(
                "%s: %d %s server(s) of %s ready in %.1f s at %s (logs in %s)",
                self.reward,
                len(replicas),
                self.config.engine,
                self.config.model or self.config.command[0],
                time.monotonic() - began,
                ", ".join(r.url for r in replicas),
                self.log_dir,
            )

    def _new_replica(self, index: int, restarts: int = 0) -> Replica:
        log_path = str(self.log_dir / f"{self.reward}-server-{index}.log")
        handle_type = _RayHandle if _ray_running() else _LocalHandle
        handle = handle_type(self.config, self.api_key, log_path, self.served_name)
        return Replica(index=index, handle=handle, log_path=log_path, restarts=restarts)

    def _start_all(self, replicas: list[Replica], stop: threading.Event) -> list[StartResult]:
        """Each replica's start result, the starts running at once (in their actors, or in threads here); the
        wait ends early when ``stop`` is set (a signal: the caller stops the replicas)."""
        if replicas and isinstance(replicas[0].handle, _RayHandle):
            return self._start_actors(replicas, stop)
        results: list[StartResult] = [StartResult()] * len(replicas)

        def one(k: int) -> None:
            results[k] = replicas[k].handle.start()

        threads = [threading.Thread(target=one, args=(k,), daemon=True) for k in range(len(replicas))]
        for thread in threads:
            thread.start()
        while any(thread.is_alive() for thread in threads) and not stop.wait(0.2):
            if any(result.error for result in results):  # one failed: the others are stopped, not waited for
                break
        return results

    def _start_actors(self, replicas: list[Replica], stop: threading.Event) -> list[StartResult]:
        import ray

        refs = [replica.handle.actor.start.remote() for replica in replicas]
        deadline = time.monotonic() + self.config.ready_timeout_s + _ACTOR_MARGIN_S
        done: list[Any] = []
        failed = False  # one replica failing ends the wait: the others are stopped, not waited for
        while len(done) < len(refs) and not failed and not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            pending = [ref for ref in refs if ref not in done]
            ready, _ = ray.wait(pending, num_returns=len(pending), timeout=min(left, 0.5))
            done += ready
            failed = any(not _result_ok(ref) for ref in ready)
        timeout = self.config.ready_timeout_s + _ACTOR_MARGIN_S
        results = []
        for replica, ref in zip(replicas, refs, strict=True):
            if ref not in done:
                stopped = StartResult(error="stopped: another replica failed to start", log_path=replica.log_path)
                results.append(stopped if failed or stop.is_set() else self._not_started(replica, timeout))
                continue
            try:
                results.append(ray.get(ref))
            except ray.exceptions.RayError as exc:
                first = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
                results.append(StartResult(error=f"the server's actor failed: {first}", log_path=replica.log_path))
        return results

    def _not_started(self, replica: Replica, timeout: float) -> StartResult:
        """Why a replica's start did not return in time: it never got its resources, or it hung."""
        import ray

        if not replica.handle.placed():
            wanted = {"CPU": self.config.cpus, "GPU": self.config.gpus}
            node = " on this node (server.host is loopback)" if self.config.loopback else ""
            return StartResult(
                error=f"its Ray actor could not get {wanted}{node} within {timeout:g} s (cluster has "
                f"{ray.cluster_resources()}, free {ray.available_resources()})",
                log_path=replica.log_path,
            )
        return StartResult(error=f"no answer from its actor within {timeout:g} s", log_path=replica.log_path)

    def _start_error(self, replica: Replica, result: StartResult) -> RuntimeFailure:
        model = self.config.model or " ".join(self.config.command)
        port = result.port or replica.port
        where = f"{self.config.host}:{port}" if port else self.config.host
        tail = [line for line in result.tail if line.strip() and not line.startswith("$ ")][-_HINT_LINES:]
        shown = "".join(f"\n  | {line}" for line in tail)
        return RuntimeFailure(
            f"{self.reward}: the managed {self.config.engine} server for model {model!r} at {where} could not start: "
            f"{result.error}",
            hint=f"the server's log is {result.log_path or replica.log_path}; fix options.server of the reward (model, "
            f"args, gpus) or the server's environment{' (its last lines below)' if shown else ''}{shown}",
        )

    # -- requests ---------------------------------------------------------------------------------------------
    def post(
        self,
        path: str,
        body: Mapping[str, Any],
        *,
        retry: Retry,
        post: Callable[..., Any] = post_json,
    ) -> Any:
        """POST ``body`` to ``path`` (under ``/v1``) of the least busy replica, restarting it when it died."""
        if not self.replicas:
            self.start()
        replica = self._pick()
        try:
            for attempt in range(2):
                generation = replica.generation
                try:
                    return post(replica.url + path, body, retry=retry, headers=self._headers(), secret=self.api_key)
                except RemoteCallError as exc:
                    if attempt or not exc.retryable or not self._revive(replica, generation):
                        raise
            raise AssertionError("unreachable")  # pragma: no cover
        finally:
            with self._lock:
                replica.in_flight -= 1

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def _pick(self) -> Replica:
        with self._lock:
            replica = min(self.replicas, key=lambda r: (r.in_flight, r.index))
            replica.in_flight += 1
            return replica

    def _revive(self, replica: Replica, generation: int) -> bool:
        """After a failed call: True when the replica was restarted since (by this call or another), so the
        call is worth sending again; False when it still runs (the failure was the server's answer)."""
        with replica.lock:
            if replica.generation != generation:
                return True
            if replica.handle.alive():
                return False
            if replica.restarts >= self.config.max_restarts:
                raise self._died(replica, "it died and server.max_restarts restarts are used up")
            log.warning(
                "%s: the server at %s died; restarting it (%d of at most %d restarts)",
                self.reward,
                replica.url,
                replica.restarts + 1,
                self.config.max_restarts,
            )
            replica.handle.stop()
            if isinstance(replica.handle, _RayHandle) and not replica.handle.actor_alive():
                replica.handle.kill()
                replica.handle = self._new_replica(replica.index).handle
            result = replica.handle.start()
            replica.restarts += 1
            if not result.ok:
                raise self._start_error(replica, result)
            replica.url, replica.port = result.url, result.port
            replica.generation += 1
            return True

    def _died(self, replica: Replica, why: str) -> RuntimeFailure:
        tail = _read_tail(replica.log_path)
        from omni_rl_rewards_remote.managed.process import last_error

        cause = last_error(tail[1:] if tail and tail[0].startswith("$ ") else tail)
        return RuntimeFailure(
            f"{self.reward}: the managed server for model {self.config.model!r} at {self.where(replica)} stopped: "
            f"{why}{': ' + cause if cause else ''}",
            hint=f"the server's log is {replica.log_path}; raise server.max_restarts, or give the server more "
            "memory (a server killed for memory dies again)",
        )

    # -- stop -------------------------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every replica (idempotent; also at interpreter exit)."""
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        replicas, self.replicas = self.replicas, []
        threads = [threading.Thread(target=_stop_and_kill, args=(replica,)) for replica in replicas]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self._closed = True


def _stop_and_kill(replica: Replica) -> None:
    replica.handle.stop()
    replica.handle.kill()


def _result_ok(ref: Any) -> bool:
    """Whether a finished start call returned a ready server (an actor error counts as a failure)."""
    import ray

    try:
        return bool(ray.get(ref).ok)
    except ray.exceptions.RayError:
        return False


def _ray_running() -> bool:
    try:
        import ray
    except ImportError:  # pragma: no cover - ray is a dependency of this plugin
        return False
    return ray.is_initialized()


def _read_tail(path: str, lines: int = 40) -> list[str]:
    try:
        return Path(path).read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return []
