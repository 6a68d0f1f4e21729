"""``omni_rl.rundir.lock``: one run per output directory; the second is refused naming the holder."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from omni_rl.errors import ConfigError
from omni_rl.rundir.lock import LOCK_FILE, RunLock

HOLD = """
import sys, time
from pathlib import Path
from omni_rl.rundir.lock import RunLock
with RunLock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    with RunLock(tmp_path / "run"), pytest.raises(ConfigError) as info, RunLock(tmp_path / "run"):
        pass
    assert info.value.exit_code == 2
    assert f"pid {os.getpid()} on host {socket.gethostname()}" in info.value.message
    assert info.value.message.endswith("@ $.run.output_dir")
    with RunLock(tmp_path / "run"):  # released when the first run ended
        pass
    assert (tmp_path / "run" / LOCK_FILE).read_text() == ""


def test_another_process_holds_it_until_it_ends(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        refused = f"in use by another run \\(pid {holder.pid} on host "
        with pytest.raises(ConfigError, match=refused), RunLock(tmp_path):
            pass
    finally:
        holder.kill()  # a killed holder (SIGKILL) releases the lock too: the kernel drops it with the process
        holder.wait(timeout=30)
    with RunLock(tmp_path):
        pass


def test_deleting_the_lock_file_does_not_let_a_second_run_in(tmp_path: Path) -> None:
    """N12: the lock is on the directory too, so ``rm .omni-rl.lock`` while a run holds it (a new file is a new
    inode, which a file lock alone would hand to the next comer) still leaves the directory refused."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        (tmp_path / LOCK_FILE).unlink()
        for _ in range(2):  # the refused attempt must not leave a file that lets the next one in
            with (
                pytest.raises(ConfigError, match=r"is in use by another run .* @ \$\.run\.output_dir"),
                RunLock(tmp_path),
            ):
                pass
        (tmp_path / LOCK_FILE).write_text("")  # a new lock file, a new inode: still refused
        with pytest.raises(ConfigError, match="in use by another run"), RunLock(tmp_path):
            pass
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with RunLock(tmp_path):
        pass


def test_an_evaluation_lock_names_its_option(tmp_path: Path) -> None:
    holder = RunLock(tmp_path, where="--out", what="evaluation", hint="choose another --out")
    with holder, pytest.raises(ConfigError) as info, RunLock(tmp_path, where="--out", what="evaluation"):
        pass
    assert "is in use by another evaluation (pid " in info.value.message
    assert info.value.message.endswith("@ --out")
