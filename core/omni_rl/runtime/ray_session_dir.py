"""The session folder of an embedded Ray, removed when the run that started it ends.

Every ``ray.init()`` that starts a cluster writes ``<temp dir>/session_<date>_<pid>/`` (logs, sockets, the
runtime environment) and points ``session_latest`` at it; Ray never removes them, so a machine that trains often
collects gigabytes of them. A run removes only the folder of the cluster it started itself (``address = "local"``),
after Ray has shut down; a cluster it joined keeps its own.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


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
