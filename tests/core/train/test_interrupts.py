"""Signals during a run (omni_rl.train.interrupts) and the resume command they print."""

from __future__ import annotations

import io
import shlex
import signal
from pathlib import Path

import pytest
from rich.console import Console

from omni_rl.train.interrupts import InterruptGuard


def test_the_first_signal_asks_the_loop_to_stop_with_its_exit_code() -> None:
    guard = InterruptGuard(Console(file=io.StringIO()))
    with guard:
        signal.raise_signal(signal.SIGTERM)
        assert guard.requested and guard.exit_code == 143 and guard.name == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) == guard._handle  # kept through the shutdown that follows a signal
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_without_a_signal_the_previous_handlers_come_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    with InterruptGuard(Console(file=io.StringIO())) as guard:
        assert signal.getsignal(signal.SIGINT) == guard._handle
    assert signal.getsignal(signal.SIGINT) == before
    assert guard.exit_code == 130


@pytest.mark.parametrize("name", ["plain", "with space", "it's"])
def test_the_resume_command_survives_the_shell(tmp_path: Path, name: str) -> None:
    from omni_rl.train.trainer import Trainer

    run_dir = tmp_path / name
    words = shlex.split(Trainer.resume_command(run_dir))
    assert words == ["omni-rl", "run", str(run_dir / "config.resolved.toml"), "--set", "run.resume=auto"]


def test_a_signal_while_ray_starts_says_so_and_ends_with_its_exit_code() -> None:
    from omni_rl.train.interrupts import STOP_AFTER_RAY_STARTS

    out = io.StringIO()
    guard = InterruptGuard(Console(file=out), doing=STOP_AFTER_RAY_STARTS)
    with guard:
        signal.raise_signal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert "SIGTERM: stopping as soon as Ray has started (nothing was trained yet) (signal again" in out.getvalue()
    error = guard.stopped_before_training()
    assert (
        error.exit_code == 143 and error.message == "interrupted (SIGTERM) while Ray was starting; nothing was trained"
    )
