"""Checkpoints that prove they are intact (issue 22): the user's three reproductions on the tiny SD3 example with
a checkpoint every step, and ``omni-rl verify``.

One reference run of 4 steps is written once per module; each test copies it, rolls it back to "killed after
step 3's checkpoint" (step_4 and its metrics gone), damages a file and resumes, exports or verifies.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from omni_rl.cli import main
from omni_rl.rundir import checkpoint
from omni_rl.rundir.manifest import MANIFEST
from omni_rl.rundir.resume import DAMAGED_EVENT

TRAINABLE = "worker_0/trainable.safetensors"
LORA = "pytorch_lora_weights.safetensors"


@pytest.fixture(scope="module")
def run_args(small_jpeg_args: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """The small sd3_tiny_jpeg run, 4 steps, a checkpoint after each."""
    return lambda out, *extra: small_jpeg_args(out, "run.steps=4", *extra)


def rows(run_dir: Path) -> dict[int, dict]:
    """Training rows by step, without timings (and without the event rows a fallback writes)."""
    found = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: {k: v for k, v in r.items() if not k.startswith("perf/")} for r in found if "event" not in r}


def events(run_dir: Path) -> list[dict]:
    found = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r for r in found if "event" in r]


def flip_byte(path: Path, offset_from_end: int = 9) -> None:
    """One byte inside the tensor data (the header, at the start, stays intact)."""
    data = bytearray(path.read_bytes())
    data[-offset_from_end] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate(path: Path, keep: int = 7) -> None:
    path.write_bytes(path.read_bytes()[:keep])


def refused_in_one_line(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """Run ``argv``, which must exit 2 (a damaged checkpoint), and return its one ``error:`` line; nothing of Ray's
    wrapper or a traceback may reach stderr."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    for noise in ("\x1b", "actor_id", "pid=", "RayTaskError", "Traceback"):
        assert noise not in err
    return line


@pytest.fixture(scope="module")
def reference(run_args: Callable[..., list[str]], ray_cluster: None, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The uninterrupted run: 4 steps, a checkpoint after each."""
    out = tmp_path_factory.mktemp("integrity") / "reference"
    assert main(run_args(out)) == 0
    return out


@pytest.fixture
def killed_after_step_3(reference: Path, tmp_path: Path) -> Callable[[], Path]:
    """A copy of the reference run as a kill right after step 3's checkpoint leaves it."""

    def make() -> Path:
        out = tmp_path / "run"
        shutil.copytree(reference, out)
        shutil.rmtree(out / "checkpoints" / "step_4")
        (out / "checkpoints" / "latest").write_text("step_3\n")
        lines = (out / "metrics.jsonl").read_text().splitlines()
        (out / "metrics.jsonl").write_text("".join(line + "\n" for line in lines if json.loads(line)["step"] <= 3))
        return out

    return make


def test_every_checkpoint_has_a_manifest_of_its_files(reference: Path) -> None:
    step_1 = reference / "checkpoints" / "step_1"
    manifest = json.loads((step_1 / MANIFEST).read_text())
    on_disk = {p.relative_to(step_1).as_posix() for p in step_1.rglob("*") if p.is_file()} - {MANIFEST}
    assert manifest["algorithm"] == "sha256" and set(manifest["files"]) == on_disk
    assert manifest["files"][TRAINABLE]["size"] == (step_1 / TRAINABLE).stat().st_size


def test_a_flipped_byte_falls_back_to_step_2_naming_the_file(
    killed_after_step_3: Callable[[], Path],
    reference: Path,
    run_args: Callable[..., list[str]],
    capsys: pytest.CaptureFixture,
) -> None:
    out = killed_after_step_3()
    flip_byte(out / "checkpoints" / "step_3" / TRAINABLE)
    assert main(run_args(out, 'run.resume="auto"')) == 0
    text = " ".join((lambda c: c.out + c.err)(capsys.readouterr()).split())
    assert f"{TRAINABLE} does not match its sha256" in text
    assert "continuing from step 2" in text and "at step 3" in text
    assert (out / "checkpoints" / "damaged" / "step_3" / TRAINABLE).is_file()  # moved, never deleted
    [event] = events(out)
    assert event["event"] == DAMAGED_EVENT and event["file"] == TRAINABLE and event["continues_from"] == 2
    expected, got = rows(reference), rows(out)
    assert sorted(got) == [1, 2, 3, 4]
    for step in (3, 4):
        assert got[step] == expected[step], f"step {step} differs after the fallback"


def test_a_truncated_file_named_by_resume_path_is_one_line_naming_it(
    killed_after_step_3: Callable[[], Path], run_args: Callable[..., list[str]], capsys: pytest.CaptureFixture
) -> None:
    out = killed_after_step_3()
    step_3 = out / "checkpoints" / "step_3"
    truncate(step_3 / TRAINABLE)
    line = refused_in_one_line(run_args(out, f'run.resume="{step_3}"'), capsys)
    assert f"{TRAINABLE} has 7 bytes" in line and str(step_3) in line
    assert step_3.is_dir()  # a checkpoint named by the user is refused, not moved


def test_a_flipped_byte_found_by_the_worker_is_one_line_naming_worker_and_file(
    killed_after_step_3: Callable[[], Path], run_args: Callable[..., list[str]], capsys: pytest.CaptureFixture
) -> None:
    out = killed_after_step_3()
    step_3 = out / "checkpoints" / "step_3"
    flip_byte(step_3 / TRAINABLE)
    line = refused_in_one_line(run_args(out, f'run.resume="{step_3}"'), capsys)
    assert "policy worker 0 failed while loading the checkpoint" in line and f"{TRAINABLE} does not match" in line


def test_export_refuses_a_truncated_lora_naming_it(
    killed_after_step_3: Callable[[], Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = killed_after_step_3()
    truncate(out / "checkpoints" / "step_1" / LORA)
    assert main(["export", str(out), "--step", "1", "--out", str(tmp_path / "exported")]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"{LORA} has 7 bytes" in err and "--step N" in err
    assert not (tmp_path / "exported").exists()


def test_verify_lists_every_checkpoint_and_fails_on_a_damaged_one(
    killed_after_step_3: Callable[[], Path], capsys: pytest.CaptureFixture
) -> None:
    out = killed_after_step_3()
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().out.count("verified") == 3
    flip_byte(out / "checkpoints" / "step_2" / "worker_0" / "optimizer.safetensors")
    (out / "checkpoints" / "step_1" / MANIFEST).unlink()
    (out / "checkpoints" / "step_3" / "trainer_state.json").write_text('{"step": 3}')  # an older version's
    (out / "checkpoints" / "step_3" / MANIFEST).unlink()
    assert main(["verify", str(out)]) == 1
    captured = capsys.readouterr()
    table = {line.split()[0]: line for line in captured.out.splitlines() if line.strip()[:1].isdigit()}
    assert "damaged" in table["1"] and "damaged" in table["2"] and "unverifiable" in table["3"]
    problems = [line for line in captured.out.splitlines() if line.startswith("step ")]
    assert "manifest.json is missing" in problems[0]  # step 1 was written with one: its loss is damage
    assert "worker_0/optimizer.safetensors does not match" in problems[1]
    assert "step 1, 2" in captured.err


@pytest.mark.slow  # over 45 s in the default suite; `nox -s integration` / `pytest -m slow` run it
def test_a_checkpoint_without_manifest_resumes_with_a_warning(
    killed_after_step_3: Callable[[], Path],
    reference: Path,
    run_args: Callable[..., list[str]],
    capsys: pytest.CaptureFixture,
) -> None:
    out = killed_after_step_3()
    step_3 = out / "checkpoints" / "step_3"
    (step_3 / MANIFEST).unlink()
    state = checkpoint.read_json(step_3 / "trainer_state.json")
    del state["format"]  # as an older version wrote it
    checkpoint.write_json(step_3 / "trainer_state.json", state)
    assert main(run_args(out, 'run.resume="auto"')) == 0
    text = " ".join((lambda c: c.out + c.err)(capsys.readouterr()).split())
    assert "its files cannot be verified" in text and "at step 4" in text
    assert rows(out)[4] == rows(reference)[4]
