"""One replica as a Ray actor: the server process runs on the actor's node with the actor's GPUs.

Ray gives the actor ``num_gpus`` GPUs and sets ``CUDA_VISIBLE_DEVICES`` to them; the server inherits that, so
vLLM sees exactly the GPUs the run reserved for it. The actor owns the server's guard (:mod:`.guard`): when the
actor dies (``ray.kill``, its owner's end, a crash), the guard stops the server. Results are plain data
(:class:`~.process.StartResult`), never an exception, so that a failed start reaches the run as one line rather
than inside Ray's traceback.
"""

from __future__ import annotations

from pathlib import Path

from omni_rl_rewards_remote.managed.config import ManagedServerConfig
from omni_rl_rewards_remote.managed.process import ServerProcess, StartResult


class ServerActor:
    """Holds one :class:`~.process.ServerProcess` (wrapped with ``ray.remote`` by :mod:`.pool`)."""

    def __init__(self, config: ManagedServerConfig, api_key: str, log_path: str, served_name: str) -> None:
        self.server = ServerProcess(config, api_key, Path(log_path), served_name)

    def start(self) -> StartResult:
        return self.server.start()

    def alive(self) -> bool:
        return self.server.serving()

    def pid(self) -> int | None:
        return self.server.pid

    def tail(self, lines: int = 20) -> list[str]:
        return self.server.tail(lines)

    def stop(self) -> int | None:
        return self.server.stop()
