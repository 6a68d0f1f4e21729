"""The session folder of an embedded Ray, removed when the run that started it ends.

Every ``ray.init()`` that starts a cluster writes ``<temp dir>/session_<date>_<pid>/`` (logs, sockets, the
runtime environment) and points ``session_latest`` at it; Ray never removes them, so a machine that trains often
collects gigabytes of them. A run removes only the folder of the cluster it started itself (``address = "local"``),
after Ray has shut down; a cluster it joined keeps its own.

A run that cannot clean up (SIGKILL, an immediate exit on a second Ctrl-C) leaves its folder, and Ray's agents
keep running in it for about a minute. So a run marks the folder it started (:data:`MARKER`: its pid, that
process's start time, host and boot) and the next embedded start removes the marked folders whose driver is gone
and that no process uses any more (none names the folder on its command line or holds a file open in it). A folder
without the marker (another tool's Ray, ``ray start``, an older omni-rl), another user's, or one still in use is
never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
from collections.abc import Iterable
from pathlib import Path

#: written into a session folder by the run that started it
MARKER = "omni-rl-driver.json"


def embedded_session_dir() -> Path | None:
    """This process's Ray session folder (Ray must be initialised), or None when Ray does not say."""
    try:
        import ray

        node = ray._private.worker._global_node
        return Path(node.get_session_dir_path()) if node is not None else None
    except (AttributeError, ImportError):
        return None


def remove_session_dir(session: Path) -> None:
    """Remove ``session`` and the ``session_latest`` link when it points there; never raises (a file Ray is still
    closing may stay behind)."""
    if not session.name.startswith("session_") or session.name == "session_latest":
        return  # never anything but a session folder
    latest = session.parent / "session_latest"
    try:
        if latest.is_symlink() and Path(os.readlink(latest)).name == session.name:
            latest.unlink()
    except OSError:
        pass
    shutil.rmtree(session, ignore_errors=True)


def ray_temp_root() -> Path:
    """Where an embedded Ray puts its session folders by default (``RAY_TMPDIR``, ``TMPDIR`` or /tmp, then ``ray``)."""
    try:
        from ray._common.utils import get_default_ray_temp_dir

        return Path(get_default_ray_temp_dir())
    except (ImportError, AttributeError):
        base = os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp"
        return Path(base) / "ray"


def mark_session_dir(session: Path) -> None:
    """Record in ``session`` which process started it (read by :func:`remove_stale_session_dirs`); never raises."""
    record = {"pid": os.getpid(), "start": _start_time(os.getpid()), "host": socket.gethostname(), "boot": _boot_id()}
    with contextlib.suppress(OSError):
        (session / MARKER).write_text(json.dumps(record) + "\n", encoding="utf-8")


def remove_stale_session_dirs(root: Path | None = None) -> list[Path]:
    """Remove the session folders under ``root`` (default :func:`ray_temp_root`) that an omni-rl run started and
    left behind: marked, this user's, their driver gone, no process using them. Returns the removed folders."""
    root = ray_temp_root() if root is None else root
    try:
        candidates = [s for s in root.glob("session_*") if _stale_candidate(s)]
    except OSError:
        return []
    if not candidates:
        return []
    in_use = _sessions_in_use(candidates)
    removed = []
    for session in candidates:
        if session not in in_use:
            remove_session_dir(session)
            removed.append(session)
    return removed


def _stale_candidate(session: Path) -> bool:
    """Marked by an omni-rl run of this user on this host whose driver process no longer runs."""
    if session.name == "session_latest" or session.is_symlink() or not session.is_dir():
        return False
    try:
        if session.stat().st_uid != os.getuid():
            return False
        record = json.loads((session / MARKER).read_text(encoding="utf-8"))
        pid, start, host = int(record["pid"]), record.get("start"), str(record["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return False  # not marked (not ours), or unreadable: left alone
    if host != socket.gethostname():
        return False  # a temp dir shared between machines: that host's processes cannot be seen from here
    if record.get("boot") and record.get("boot") != _boot_id():
        return True  # the machine restarted since: none of its processes runs
    return not _alive(pid, start)


def _alive(pid: int, start: object) -> bool:
    """Whether process ``pid`` runs and is the one that wrote the marker (not a later process given its pid)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return start is None or _start_time(pid) in (None, start)


def _sessions_in_use(sessions: Iterable[Path]) -> set[Path]:
    """The ``sessions`` some live process names on its command line or holds a file open in (Ray's agents outlive a
    killed driver by about a minute). Without /proc to read, every one counts as in use."""
    prefixes = {session: str(session) for session in sessions}
    proc = Path("/proc")
    if not (proc / "self").is_dir():
        return set(prefixes)
    used: set[Path] = set()
    for entry in proc.iterdir():
        if len(used) == len(prefixes):
            break
        if not entry.name.isdigit():
            continue
        paths, command = _paths_of(entry), _cmdline(entry)
        for session, prefix in prefixes.items():
            opened = any(p == prefix or p.startswith(prefix + "/") for p in paths)
            if opened or prefix.encode() in command:
                used.add(session)
    return used


def _paths_of(entry: Path) -> list[str]:
    """The working directory and open files of the process at ``/proc/<pid>`` (empty when they cannot be read)."""
    paths = []
    try:
        paths.append(os.readlink(entry / "cwd"))
        for fd in (entry / "fd").iterdir():
            try:
                paths.append(os.readlink(fd))
            except OSError:
                continue
    except OSError:
        pass
    return paths


def _cmdline(entry: Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:
        return b""


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks after boot (``/proc/<pid>/stat`` field 22), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
