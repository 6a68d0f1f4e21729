"""One run per output directory: an exclusive lock held for the whole run.

Two runs writing one directory interleave their configs, metrics and checkpoints, and both report success (A's
summary then points at B's checkpoint). A scheduler restarting a job whose first instance is still alive is the
same case. ``RunLock`` takes ``flock(LOCK_EX | LOCK_NB)`` on the output directory itself and on
``<output_dir>/.omni-rl.lock``, into which it writes the holder (pid, host, start time); a second run is refused at
once, naming the holder (exit 2).

Why the directory: a lock on the file alone was released, for every later comer, by deleting the file (``rm
.omni-rl.lock`` while a run trains): the next run created a new file, a new inode, locked that and mixed its
checkpoints into the live run's. A directory in use cannot be replaced by deleting one entry of it, so its lock
holds however the lock file is treated. The file lock stays for the holder's name and for older versions of
omni-rl, which lock only the file. Where directories cannot be locked (NFS maps ``flock`` to byte-range locks,
which need a descriptor open for writing, and a directory never is), the file lock alone is what remains.

The kernel releases both locks when the holder's process ends however it ends (SIGKILL, a crash), so a stale lock
never blocks a resume; the file itself stays. The descriptors are not inherited by the processes the run starts
(Ray), so a leftover Ray process cannot keep holding them.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from omni_rl.errors import ConfigError

LOCK_FILE = ".omni-rl.lock"
#: errors of a directory ``flock`` that mean "this filesystem does not lock directories", not "held"
_CANNOT_LOCK_DIRECTORIES = (errno.EBADF, errno.EINVAL, errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOTSUP)
RUN_HINT = (
    "wait for that run to end or stop it (its checkpoint is kept), or choose another [run] output_dir; nothing was "
    "changed"
)


class RunLock:
    """``with RunLock(run_dir):`` the run; raises ConfigError when another process holds it.

    ``where`` names the setting in the refusal (``$.run.output_dir``, or ``--out`` for ``omni-rl eval``) and
    ``what`` the kind of work that holds it ("run", "evaluation")."""

    def __init__(
        self, run_dir: Path, *, where: str = "$.run.output_dir", what: str = "run", hint: str = RUN_HINT
    ) -> None:
        self.directory = Path(run_dir)
        self.path = self.directory / LOCK_FILE
        self.where = where
        self.what = what
        self.hint = hint
        self._fds: list[int] = []

    def __enter__(self) -> RunLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            directory = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            self._fds.append(directory)
            if not _lock(directory):
                self._refuse(_read_path(self.path))
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            self._fds.append(fd)
            if not _lock(fd, required=True):
                self._refuse(_read(fd))
        except BaseException:
            self._close()
            raise
        started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()}, started {started}\n".encode(), 0)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if not self._fds:
            return
        try:
            if len(self._fds) == 2:
                os.ftruncate(self._fds[1], 0)  # no holder named once the run is over
        except OSError:
            pass  # the file was deleted or its filesystem went read-only: the locks are released below anyway
        finally:
            self._close()

    def _close(self) -> None:
        for fd in reversed(self._fds):  # closing releases each lock
            os.close(fd)
        self._fds.clear()

    def _refuse(self, holder: str) -> None:
        raise ConfigError(
            f"output directory {str(self.directory)!r} is in use by another {self.what} "
            f"({holder or 'another process'}) @ {self.where}",
            hint=self.hint,
        ) from None


def _lock(fd: int, required: bool = False) -> bool:
    """``flock(LOCK_EX | LOCK_NB)``: True when taken, False when another process holds it. A filesystem that
    cannot lock this descriptor (a directory on NFS) counts as taken unless ``required``."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as exc:
        if required or exc.errno not in _CANNOT_LOCK_DIRECTORIES:
            raise
    return True


def _read(fd: int) -> str:
    try:
        return os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    except OSError:
        return ""


def _read_path(path: Path) -> str:
    """The holder the lock file names; empty when it was deleted (the directory lock still refuses)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
