"""One managed server process: a free port, its log file, readiness, its last error, and stop.

The server runs under :mod:`.guard`, whose stdin this object holds: should this process die without stopping it,
the guard stops the server. Readiness is ``GET /v1/models`` answering 200 with the run's key (the API is up, the
model loaded, the key accepted); a server that exits first fails at once, with its last error line read from the
log. Nothing here touches Ray: :mod:`.actor` runs it on the resources asked for, the tests run it as it is.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import deque
from pathlib import Path

import attrs

from omni_rl_rewards_remote.managed.command import server_command, server_env
from omni_rl_rewards_remote.managed.config import ManagedServerConfig
from omni_rl_rewards_remote.secrets import redact

#: log lines a failure carries
TAIL_LINES = 20
#: a line that reads as the cause of a failure (a Python exception, an engine's error)
_ERROR_LINE = re.compile(r"(Error|Exception|error:|ERROR|Traceback|Killed|No such file|not found|refused)")
_NOISE = re.compile(r"^\s*(\^+|~+|File \"|During handling|The above exception|Traceback \(most recent call last\))")


@attrs.frozen
class StartResult:
    """How a start ended: ``url`` (the API root, ``http://host:port/v1``) when ready, else ``error`` (one line)
    with the log's last lines. Plain data: it crosses the Ray actor boundary without Ray's traceback wrapping."""

    url: str = ""
    error: str = ""
    tail: tuple[str, ...] = ()
    port: int = 0
    log_path: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return bool(self.url) and not self.error


def free_port(host: str) -> int:
    """A port nobody listens on at ``host`` now (the server binds it a moment later)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def last_error(lines: list[str]) -> str:
    """The line of a server's log that says why it stopped: the last one reading as an error (the exception's
    ``Type: message`` line rather than a traceback's frames), else the last line; "" for an empty log."""
    lines = [line.strip() for line in lines if line.strip()]
    for line in reversed(lines):
        if _ERROR_LINE.search(line) and not _NOISE.match(line):
            return line
    return lines[-1] if lines else ""


class ServerProcess:
    """One replica's server process (see the module docstring)."""

    def __init__(
        self, config: ManagedServerConfig, api_key: str, log_path: Path, served_name: str = "", advertise: str = ""
    ) -> None:
        self.config = config
        self._key = api_key
        self.log_path = Path(log_path)
        self.served_name = served_name or config.model
        #: the address the judge reaches the server at: the bind address, or this node's IP when bound to all
        self.advertise = advertise or (config.host if config.host not in ("0.0.0.0", "::") else _node_ip())
        self.port = 0
        self._proc: subprocess.Popen | None = None

    def __repr__(self) -> str:  # never the key
        return f"ServerProcess(model={self.config.model!r}, port={self.port}, pid={self.pid})"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def url(self) -> str:
        host = f"[{self.advertise}]" if ":" in self.advertise else self.advertise
        return f"http://{host}:{self.port}/v1"

    def alive(self) -> bool:
        """Whether the server process runs (its guard does)."""
        return self._proc is not None and self._proc.poll() is None

    def serving(self) -> bool:
        """Whether it runs and still accepts connections: a server that died a moment ago (its guard not yet
        gone) or hangs without listening is not serving; one too busy to accept within 2 s still counts."""
        if not self.alive():
            return False
        try:
            with socket.create_connection((self.advertise, self.port), timeout=2.0):
                return True
        except TimeoutError:
            return True
        except OSError:
            return False

    def start(self, timeout_s: float | None = None) -> StartResult:
        """Start the server and wait until it is ready (or exited, or ``timeout_s`` passed)."""
        self.stop()
        self.port = self.config.port or free_port(self.config.host)
        command = server_command(self.config, self.config.host, self.port, self.served_name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        guard = [
            sys.executable,
            "-m",
            "omni_rl_rewards_remote.managed.guard",
            "--grace",
            str(self.config.stop_timeout_s),
        ]
        with self.log_path.open("ab") as log:
            log.write(f"$ {' '.join(command)}\n".encode())  # the key is in the environment, never here
            log.flush()
            self._proc = subprocess.Popen(
                [*guard, "--", *command],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=server_env(self.config, self._key),
                start_new_session=True,  # a signal to the owner's group (a Ctrl-C) is the owner's to pass on
            )
        return self.wait_ready(self.config.ready_timeout_s if timeout_s is None else timeout_s)

    def wait_ready(self, timeout_s: float) -> StartResult:
        start = time.monotonic()
        deadline = start + timeout_s
        while True:
            if not self.alive():
                code = self._proc.returncode if self._proc is not None else None
                return self._failed(f"the server exited with status {code} before it was ready", start)
            if self._answers():
                return StartResult(
                    url=self.url, port=self.port, log_path=str(self.log_path), seconds=time.monotonic() - start
                )
            if time.monotonic() >= deadline:
                self.stop()
                return self._failed(f"the server was not ready within {timeout_s:g} s (server.ready_timeout_s)", start)
            time.sleep(0.25)

    def _answers(self) -> bool:
        request = urllib.request.Request(self.url + "/models", headers={"Authorization": f"Bearer {self._key}"})
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                json.loads(response.read())
                return response.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def _failed(self, why: str, start: float) -> StartResult:
        tail = tuple(redact(line, self._key) for line in self.tail())
        cause = last_error(list(tail)[1:] if tail and tail[0].startswith("$ ") else list(tail))
        error = f"{why}: {cause}" if cause else why
        return StartResult(
            error=error, tail=tail, port=self.port, log_path=str(self.log_path), seconds=time.monotonic() - start
        )

    def tail(self, lines: int = TAIL_LINES) -> list[str]:
        """The log's last lines (of this start and the ones before it)."""
        try:
            with self.log_path.open("rb") as log:
                return [line.decode(errors="replace").rstrip("\n") for line in deque(log, maxlen=lines)]
        except OSError:
            return []

    def stop(self) -> int | None:
        """SIGTERM to the server through its guard (which kills its process group after the grace period); the
        guard's exit status, or None when nothing ran."""
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if proc.poll() is None:
            try:
                proc.terminate()
                proc.wait(timeout=self.config.stop_timeout_s + 10)
            except subprocess.TimeoutExpired:
                proc.kill()  # the server gets its SIGTERM from the kernel (the guard's death), then its group dies
                proc.wait(timeout=10)
        if proc.stdin is not None:
            proc.stdin.close()
        return proc.returncode


def _node_ip() -> str:
    try:
        import ray

        return ray.util.get_node_ip_address()
    except Exception:  # without Ray: this host's name
        return socket.gethostbyname(socket.gethostname())
