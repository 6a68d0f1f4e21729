"""Errors from Ray actors as one readable line (omni_rl.runtime.faults, cli.output): the cause, not Ray's wrapper; no
ANSI
escapes; actor reprs and ids only with --debug. Ray's wrapper is imitated (the real one: test_checkpoint_integrity)."""

from __future__ import annotations

import pytest

from omni_rl.cli.output import Output
from omni_rl.errors import RuntimeFailure
from omni_rl.runtime.faults import clean_line, describe_remote

HEADER = (
    "\x1b[36mray::PolicyWorker.load_state()\x1b[39m (pid=4242, ip=10.0.0.7, actor_id=cb623ff336f70eb4be5865630100, "
    "repr=<omni_rl.runtime.worker.PolicyWorker object at 0x7fe>)"
)


class SafetensorError(Exception):
    pass


def ray_task_error(cause: BaseException) -> Exception:
    """What ``ray.get`` raises: an instance of ``RayTaskError(<cause type>)`` carrying ``cause``."""
    wrapper = type(f"RayTaskError({type(cause).__name__})", (Exception,), {})
    error = wrapper(f"{HEADER}\n  File 'x.py', line 1, in load\n{type(cause).__name__}: {cause}")
    error.cause = cause  # type: ignore[attr-defined]
    return error


def test_a_remote_error_is_its_cause_in_one_line() -> None:
    error = ray_task_error(SafetensorError("Error while deserializing header: invalid header length"))
    assert describe_remote(error) == "SafetensorError: Error while deserializing header: invalid header length"
    assert clean_line(str(error)).startswith("File 'x.py'")  # the header is gone, ids and escapes too


@pytest.mark.parametrize("debug", [False, True])
def test_output_never_prints_escapes_and_ids_only_with_debug(debug: bool, capsys: pytest.CaptureFixture) -> None:
    output = Output(debug=debug)
    output.error(RuntimeFailure(f"policy worker 0 failed: {HEADER} SafetensorError: bad", hint="resume with: x"))
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert ("actor_id" in err) is debug
    output.unexpected(ray_task_error(SafetensorError("bad header")))
    err = capsys.readouterr().err
    assert "error: SafetensorError: bad header" in err and "\x1b[36m" not in err.split("error:")[-1]
