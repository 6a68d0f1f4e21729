"""The run directory is protected: a resume that changes what the checkpoint fixes is refused and changes nothing
(the run still resumes and exports after it), and a second run into a directory in use is refused (exit 2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from omni_rl.cli import main

HOLD = """
import sys
from pathlib import Path
from omni_rl.rundir.lock import RunLock
with RunLock(Path(sys.argv[1])):
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_a_refused_resume_leaves_the_run_resumable_and_exportable(
    tmp_path: Path, small_jpeg_args, ray_cluster: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(small_jpeg_args(out)) == 0  # lora_rank 8, two steps, a checkpoint each
    resolved = out / "config.resolved.toml"
    before = resolved.read_bytes()
    capsys.readouterr()

    changed = ["run", str(resolved), "--set", "run.resume=auto", "--set", "model.options.lora_rank=16"]
    assert main(changed) == 2
    err = capsys.readouterr().err
    assert "model.options.lora_rank is 16 here but 8 in the run that wrote the checkpoint" in err, err
    assert resolved.read_bytes() == before  # the resume command and export still read the run's own config

    assert main(["check", *changed[1:]]) == 2  # check finds it too, without starting anything
    assert "model.options.lora_rank is 16 here but 8" in capsys.readouterr().err

    assert main(["run", str(resolved), "--set", "run.resume=auto", "--set", "run.steps=3"]) == 0
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps[-1] == 3
    assert main(["export", str(out), "--out", str(tmp_path / "lora")]) == 0
    assert (tmp_path / "lora" / "pytorch_lora_weights.safetensors").is_file()


def test_a_second_run_into_a_directory_in_use_exits_2_naming_the_holder(
    tmp_path: Path, small_jpeg_args, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(out)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(small_jpeg_args(out)) == 2
        err = capsys.readouterr().err
        assert f"is in use by another run (pid {holder.pid} on host " in err, err
        assert not (out / "config.resolved.toml").exists() and not (out / "metrics.jsonl").exists()
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
