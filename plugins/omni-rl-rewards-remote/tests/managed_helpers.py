"""What the managed-server tests share: the fake server's ``server`` table, and the processes left behind.

Every process a test's server starts carries a marker variable in its environment (``server.env``); after a
stop, none may be alive (read from ``/proc/<pid>/environ``, as tests/integration/test_signals.py does)."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Any

FAKE = Path(__file__).with_name("fake_judge_server.py")


def new_marker() -> str:
    return f"omni-rl-managed-{uuid.uuid4().hex[:12]}"


def fake_server(marker: str, *extra: str, **options: Any) -> dict[str, Any]:
    """A ``server`` table running the fake judge server (``engine = "command"``), ``extra`` its flags."""
    command = [sys.executable, str(FAKE), "--host", "{host}", "--port", "{port}", "--model", "{model}", *extra]
    table: dict[str, Any] = {
        "engine": "command",
        "model": "fake-judge",
        "command": command,
        "gpus": 0,
        "cpus": 0,
        "env": {"OMNI_RL_TEST_MARKER": marker},
        "ready_timeout_s": 30,
        "stop_timeout_s": 5,
    }
    table.update(options)
    return table


def left_behind(marker: str) -> list[str]:
    """Live processes (not zombies) carrying ``marker`` in their environment."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"OMNI_RL_TEST_MARKER={marker}".encode() not in (proc / "environ").read_bytes():
                continue
            if "State:\tZ" in (proc / "status").read_text():
                continue
            found.append(f"{proc.name}: " + (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:
            continue
    return found


def none_left(marker: str, timeout: float = 20.0) -> list[str]:
    """``left_behind`` once it is empty or ``timeout`` passed (a stop takes a moment to reach every process)."""
    deadline = time.monotonic() + timeout
    while (found := left_behind(marker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found
