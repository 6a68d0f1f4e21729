"""One run per output directory: an exclusive lock held for the whole run.

Two runs writing one directory interleave their configs, metrics and checkpoints, and both report success (A's
summary then points at B's checkpoint). A scheduler restarting a job whose first instance is still alive is the
same case. ``RunLock`` takes ``flock(LOCK_EX | LOCK_NB)`` on ``<output_dir>/.omni-rl.lock`` and writes the
holder (pid, host, start time) into it; a second run is refused at once, naming the holder (exit 2). The kernel
releases the lock when the holder's process ends however it ends (SIGKILL, a crash), so a stale lock never
blocks a resume; the file itself stays. The descriptor is not inherited by the processes the run starts (Ray),
so a leftover Ray process cannot keep holding it. On NFS, Linux maps ``flock`` to NFS byte-range locks, which
other nodes see.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from omni_rl.errors import ConfigError

LOCK_FILE = ".omni-rl.lock"


class RunLock:
    """``with RunLock(run_dir):`` the run; raises ConfigError when another process holds it."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd) or "another process"
            os.close(fd)
            raise ConfigError(
                f"output directory {str(self.path.parent)!r} is in use by another run ({holder}) @ $.run.output_dir",
                hint="wait for that run to end or stop it (its checkpoint is kept), or choose another [run] "
                "output_dir; nothing was changed",
            ) from None
        except OSError:
            os.close(fd)
            raise
        started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()}, started {started}\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)  # no holder named once the run is over
        finally:
            os.close(self._fd)  # releases the lock
            self._fd = None


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""
