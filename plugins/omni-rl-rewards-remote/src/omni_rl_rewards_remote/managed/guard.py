"""``python -m omni_rl_rewards_remote.managed.guard --grace S -- CMD...``: run CMD and never outlive the owner.

The owner (the server's Ray actor) holds the write end of this process's stdin. When the owner goes away for any
reason, a ``ray.kill`` or a crash included, stdin reaches end-of-file and the guard ends CMD's whole process group
(SIGTERM, then SIGKILL after ``--grace`` seconds): vLLM's engine processes go with it. SIGTERM or SIGINT to the
guard does the same. CMD also gets SIGTERM from the kernel should the guard itself be killed (Linux
``PR_SET_PDEATHSIG``). The guard exits with CMD's exit status.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the guard dies (Linux only; elsewhere the stdin watch remains)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def stop_group(child: subprocess.Popen, grace: float) -> int:
    """SIGTERM to the child's process group, SIGKILL to it after ``grace`` s; the child's exit status."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, sig)
        try:
            child.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; members that ignored SIGTERM (an engine process mid-shutdown) go now
        deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 0.0)
        while _group_alive(child.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _group_alive(child.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
        break
    return child.returncode if child.returncode is not None else -signal.SIGKILL


def _group_alive(pgid: int) -> bool:
    """Whether a live (not zombie) process is left in the group: a zombie nobody reaps (a container's PID 1 may
    not) still answers ``killpg(pgid, 0)``, and must not hold the stop up."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its closing parenthesis
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grace", type=float, default=30.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command after --")
    child = subprocess.Popen(command, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
    # the handlers and the owner's watch only ask; the main thread stops the child (a handler that waited on the
    # child would wait on the lock of the wait it interrupted)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())

    def watch_owner() -> None:
        try:
            while os.read(0, 4096):  # the owner writes nothing: this returns b"" when it is gone
                pass
        except OSError:
            pass
        stop.set()

    threading.Thread(target=watch_owner, daemon=True).start()
    while child.poll() is None and not stop.wait(0.1):
        pass
    if stop.is_set():
        code = stop_group(child, args.grace)
    else:
        code = child.returncode
        if _group_alive(child.pid):  # the leader exited on its own: its stragglers must not outlive it
            stop_group(child, min(args.grace, 5.0))
    sys.stdout.flush()
    os._exit(_exit_status(code))  # not a normal exit: the watching thread is blocked in a read


def _exit_status(code: int) -> int:
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    main()
