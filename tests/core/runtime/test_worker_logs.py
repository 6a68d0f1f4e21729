"""The driver's view of worker logs: a failed constructor's traceback is dropped (the driver prints its cause);
the session folder of an embedded Ray is removed after the run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omni_rl.runtime.ray_session_dir import remove_session_dir
from omni_rl.runtime.worker_logs import CREATION_FAILURE, DropCreationFailures


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
