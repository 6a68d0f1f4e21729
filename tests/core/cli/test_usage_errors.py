"""A user's first mistakes are usage errors (exit 2, one line, no traceback), and a few smaller promises of issue
33 (item 11): ``--set eval_reward.0.name`` creates the first ``[[eval_reward]]``; ``package:`` paths stay inside an
installed package and are found without importing it; tables print whole off a terminal."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from core_toys import TOY_CONFIG
from rich.console import Console
from rich.table import Table

from omni_rl.cli import main
from omni_rl.config import load_config
from omni_rl.config.overrides import apply_overrides
from omni_rl.errors import ConfigError
from omni_rl.package_paths import package_path
from omni_rl.registry import Registry
from omni_rl.reporting.console_width import print_whole
from omni_rl.rundir import start as rundir
from omni_rl.rundir.writable import writable_file


def _usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    return err


def test_set_creates_the_first_eval_reward(write_config: Callable[..., Path], toy_registry: Registry) -> None:
    raw = apply_overrides({"reward": [{"name": "a"}]}, ["eval_reward.0.name=b", "eval_reward.0.on_error=zero"])
    assert raw["eval_reward"] == [{"name": "b", "on_error": "zero"}]
    config = load_config(
        write_config(TOY_CONFIG), ["eval_reward.0.name=toy_brightness", "run.eval_every=1"], registry=toy_registry
    )
    assert [r.name for r in config.eval_rewards] == ["toy_brightness"]


@pytest.mark.parametrize("ema", ["2", "-0.1", "nan", "1"])
def test_compare_refuses_an_ema_outside_0_1(ema: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(["compare", str(tmp_path), "--ema", ema], capsys)
    assert f"--ema {float(ema)} is not an EMA factor" in err


def test_compare_refuses_an_out_that_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _usage_error(["compare", str(tmp_path), "--out", str(tmp_path)], capsys)
    assert "is a directory; --out takes a file name" in err


def test_export_refuses_an_out_it_cannot_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    err = _usage_error(["export", str(tmp_path), "--out", str(blocker / "lora")], capsys)
    assert "is a file @ --out" in err


def test_an_output_dir_that_is_a_file_or_read_only_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "runs"
    blocker.write_text("x")
    for target in (blocker, blocker / "run1"):
        with pytest.raises(ConfigError, match=r"is a file @ \$\.run\.output_dir") as caught:
            rundir.prepare(target)
        assert caught.value.exit_code == 2
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if Path(path) == tmp_path else real_access(path, mode))
    with pytest.raises(ConfigError, match=r"permission denied.* @ \$\.run\.output_dir"):
        rundir.prepare(tmp_path / "new")
    with pytest.raises(ConfigError, match="permission denied"):
        writable_file(tmp_path / "x.png", "--out")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs the proc filesystem")
def test_a_path_under_proc_is_a_usage_error_for_check_run_and_export(
    write_config: Callable[..., Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    use_registry: Callable[[Registry], Registry],
    toy_registry: Registry,
) -> None:
    """os.access says /proc is writable (for root; and it is a directory), but mkdir there fails with ENOENT: that
    was a raw FileNotFoundError (exit 1) from `run` and `export`, and `check` passed it."""
    use_registry(toy_registry)
    path, prompts = write_config(TOY_CONFIG), tmp_path / "prompts.txt"
    prompts.write_text("a red square\n")
    for command in ("check", "run"):
        err = _usage_error(
            [command, str(path), "--set", "run.output_dir=/proc/qa_out", "--set", f"data.train={prompts}"], capsys
        )
        assert "cannot create directories in '/proc'" in err and "@ $.run.output_dir" in err, err
    err = _usage_error(["export", str(tmp_path), "--out", "/proc/x"], capsys)
    assert "cannot create directories in '/proc'" in err and "@ --out" in err
    assert not Path("/proc/qa_out").exists()


def test_a_config_file_or_a_device_as_the_prompt_source_is_refused(
    write_config: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    use_registry: Callable[[Registry], Registry],
    toy_registry: Registry,
) -> None:
    """A .toml was read as a prompt list (each of its lines a prompt, exit 0), and /dev/zero "did not exist"."""
    use_registry(toy_registry)
    path = write_config(TOY_CONFIG)
    err = _usage_error(["check", str(path), "--set", f"data.train={path}"], capsys)
    assert f"prompt source '{path}' is a TOML file, not a prompt list @ $.data.train" in err
    assert "hint: give a .txt (one prompt per line), .jsonl" in err
    if Path("/dev/zero").exists():
        err = _usage_error(["check", str(path), "--set", "data.train=/dev/zero"], capsys)
        assert "prompt source '/dev/zero' is not a regular file @ $.data.train" in err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("package:omni_rl:../omni_rl/errors.py", "without '..'"),
        ("package:omni_rl:/etc/passwd", "must be relative"),
        ("package:omni_rl:sub/../../x", "without '..'"),
        ("package:this:x.txt", "'this' is a module, not a package"),
        ("package:os.path:x", "not the name of a top-level package"),
        ("package:omni_rl:", "expected package:<package>:<path>"),
    ],
)
def test_package_paths_stay_inside_a_package(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        package_path(spec)


def test_package_paths_do_not_import_the_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "loud_pkg_xyz"
    package.mkdir()
    (package / "__init__.py").write_text("raise SystemExit('imported!')\n")
    (package / "data.txt").write_text("a prompt\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert package_path("package:loud_pkg_xyz:data.txt").read_text() == "a prompt\n"
    assert "loud_pkg_xyz" not in sys.modules


def test_check_of_package_this_neither_imports_it_nor_fails_raw(
    write_config: Callable[..., Path],
    capsys: pytest.CaptureFixture[str],
    use_registry: Callable[[Registry], Registry],
    toy_registry: Registry,
) -> None:
    use_registry(toy_registry)
    sys.modules.pop("this", None)
    path = write_config(TOY_CONFIG + '\n[data]\ntrain = "package:this:x.txt"\n')
    err = _usage_error(["check", str(path)], capsys)
    assert "'this' is a module, not a package" in err and "@ $.data.train" in err
    assert "this" not in sys.modules and "Zen of Python" not in capsys.readouterr().out


def test_tables_and_commands_print_whole_off_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)  # an explicit COLUMNS is a width the user chose, kept
    out = io.StringIO()
    console = Console(file=out, width=80, force_terminal=False)
    table = Table("run", "last checkpoint")
    long_path = "/very/long/path/" + "segment/" * 12 + "checkpoints/step_300"
    table.add_row("runs/quickstart", long_path)
    print_whole(console, table)
    command = "export: omni-rl export " + "/runs/" + "deep/" * 15 + " --out lora"
    print_whole(console, command)
    lines = out.getvalue().splitlines()
    assert any(long_path in line for line in lines)
    assert command in lines


def test_export_keeps_library_chatter_off_its_output(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import logging
    import warnings

    from omni_rl.cli.quiet import quiet_libraries

    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    logging.getLogger("transformers").setLevel(logging.NOTSET)
    with quiet_libraries():
        warnings.warn("`torch_dtype` is deprecated! Use `dtype` instead!", FutureWarning, stacklevel=1)
        logging.getLogger("transformers.modeling_utils").warning("Some weights were not initialized")
        assert os.environ["TQDM_DISABLE"] == "1" and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
    captured = capsys.readouterr()
    assert "deprecated" not in captured.err and "not initialized" not in captured.err
    assert "TQDM_DISABLE" not in os.environ and logging.getLogger("transformers").level == logging.NOTSET
    with quiet_libraries(enabled=False), pytest.warns(FutureWarning):  # --debug: everything shows
        warnings.warn("shown", FutureWarning, stacklevel=1)
