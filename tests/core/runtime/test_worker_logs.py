"""The driver's view of worker logs: a failed constructor's traceback is dropped (the driver prints its cause), the
line prefixes carry no colour under NO_COLOR; the session folder of an embedded Ray is removed after the run, and a
killed run's on the next start."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from omni_rl.runtime.ray_session_dir import MARKER, mark_session_dir, remove_session_dir, remove_stale_session_dirs
from omni_rl.runtime.worker_logs import CREATION_FAILURE, DropCreationFailures, plain_prefixes


def _batch(pid: int, *lines: str) -> dict[str, Any]:
    return {"ip": "10.0.0.1", "pid": pid, "is_err": True, "lines": list(lines)}


def test_a_failed_constructor_is_cut_and_its_process_silenced() -> None:
    printed: list[dict[str, Any]] = []
    drop = DropCreationFailures(printed.append)
    drop(_batch(1, "loading the model", f"{CREATION_FAILURE}: The actor died ...", "  File ...", "    ^^^^"))
    drop(_batch(1, "omni_rl.errors.ConfigError: path does not exist"))
    drop(_batch(2, "worker 2 samples"))
    assert [b["lines"] for b in printed] == [["loading the model"], ["worker 2 samples"]]
    assert printed[1]["pid"] == 2 and printed[1]["is_err"]


def test_a_batch_that_starts_with_the_failure_prints_nothing() -> None:
    printed: list[dict[str, Any]] = []
    DropCreationFailures(printed.append)(_batch(3, f"\x1b[36m(PolicyWorker pid=3)\x1b[0m {CREATION_FAILURE}: x"))
    assert printed == []


def test_the_session_folder_and_its_latest_link_go(tmp_path: Path) -> None:
    session = tmp_path / "session_2026-01-01_00-00-00_000000_1"
    other = tmp_path / "session_2026-01-01_00-00-00_000000_2"
    (session / "logs").mkdir(parents=True)
    other.mkdir()
    (tmp_path / "session_latest").symlink_to(session)
    remove_session_dir(session)
    assert not session.exists() and not (tmp_path / "session_latest").is_symlink()
    assert other.exists()


def test_only_session_folders_are_removed(tmp_path: Path) -> None:
    keep = tmp_path / "my_data"
    keep.mkdir()
    remove_session_dir(keep)
    assert keep.exists()


def test_ray_line_prefixes_carry_no_colour_under_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    """qa-2026-12: ``(PolicyWorker pid=...)`` came with ANSI escapes under NO_COLOR=1 and into log files."""
    from ray._private.worker import print_worker_logs

    def printed() -> str:
        out = io.StringIO()
        print_worker_logs({"pid": 7, "ip": "h", "localhost": "h", "actor_name": "PolicyWorker", "lines": ["x"]}, out)
        return out.getvalue()

    monkeypatch.delenv("RAY_COLOR_PREFIX", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    assert "\x1b[" in printed()  # Ray's own default
    assert plain_prefixes() and printed() == "(PolicyWorker pid=7) x\n"
    monkeypatch.setenv("RAY_COLOR_PREFIX", "1")  # the user's own choice wins
    assert not plain_prefixes() and os.environ["RAY_COLOR_PREFIX"] == "1"


# -- stale session folders (N10: a killed run's folder, Ray's agents still in it for a minute) ------------------


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def _session(root: Path, name: str, pid: int | None, host: str | None = None) -> Path:
    session = root / f"session_2026-01-01_00-00-00_00000{name}"
    (session / "logs").mkdir(parents=True)
    (session / "logs" / "raylet.out").write_text("log\n")
    if pid is not None:
        record = {"pid": pid, "start": None, "host": host or socket.gethostname(), "boot": None}
        (session / MARKER).write_text(json.dumps(record))
    return session


def test_mark_records_this_process(tmp_path: Path) -> None:
    mark_session_dir(tmp_path)
    record = json.loads((tmp_path / MARKER).read_text())
    assert record["pid"] == os.getpid() and record["host"] == socket.gethostname() and record["start"] > 0


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc")
def test_only_marked_folders_of_gone_drivers_that_nothing_uses_are_removed(tmp_path: Path) -> None:
    dead = _dead_pid()
    stale = _session(tmp_path, "1", dead)
    live_driver = _session(tmp_path, "2", os.getpid())
    not_ours = _session(tmp_path, "3", None)  # another tool's Ray, `ray start`, an older omni-rl
    other_host = _session(tmp_path, "4", dead, host="another-machine")
    held = _session(tmp_path, "5", dead)  # an agent still writing its log
    named = _session(tmp_path, "6", dead)  # an agent whose command line names the folder
    (tmp_path / "session_latest").symlink_to(stale)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; f = open(sys.argv[1], 'a'); print('ready', flush=True); sys.stdin.read()",
         str(held / "logs" / "raylet.out")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    naming = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()", f"--session-dir={named}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == naming.stdout.readline().strip() == "ready"
        assert remove_stale_session_dirs(tmp_path) == [stale]
    finally:
        for proc in (holder, naming):
            proc.kill()
            proc.wait(timeout=30)
    assert not stale.exists() and not (tmp_path / "session_latest").is_symlink()
    assert all(p.is_dir() for p in (live_driver, not_ours, other_host, held, named))
    assert sorted(remove_stale_session_dirs(tmp_path)) == [held, named]  # their processes are gone now
