"""Fault injection around checkpoints (issue 22): kills of the driver or a worker at random points of a save, a
full disk during a save, and bytes flipped or cut in every file kind, or the manifest deleted.

After each fault: no damaged checkpoint is ever taken as good, the previous checkpoint is intact (its manifest
lists the uninterrupted run's files and hashes), and the resumed run logs the uninterrupted run's metrics from its
checkpoint on.

The default suite tries a few points; ``nox -s chaos`` many (``OMNI_RL_CHAOS_POINTS``, seeded by
``OMNI_RL_CHAOS_SEED``). With ``OMNI_RL_CHAOS_REPORT=<file>`` the counts are written there as JSON (the numbers in
docs/benchmarks.md).

A driver kill is an exception raised from a Python audit hook at the N-th file-system operation the driver makes
under ``checkpoints/`` while saving: the process stops there as a SIGKILL would (no cleanup of the checkpoint),
in seconds and on the shared Ray. A worker kill is a real SIGKILL of the worker process while it writes.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import random
import shutil
import signal
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from omni_rl.cli import main
from omni_rl.errors import CheckpointDamaged
from omni_rl.rundir import checkpoint
from omni_rl.rundir.manifest import MANIFEST, CheckpointReader
from omni_rl.rundir.resume import read_driver_files, resume
from omni_rl.rundir.start import RunStart
from omni_rl.rundir.verify import verify_checkpoint
from omni_rl.runtime.group import WorkerGroup
from omni_rl.train.trainer import Trainer

POINTS = int(os.environ.get("OMNI_RL_CHAOS_POINTS", "1"))
SEED = int(os.environ.get("OMNI_RL_CHAOS_SEED", "0"))
COUNTS: Counter[str] = Counter()
#: the step whose save is faulted (the run has 2 steps: step_1 is the checkpoint that must survive)
FAULTED_STEP = 2


class SimulatedKill(BaseException):
    """Stops the driver where it stands: not an Exception, so no ``except`` on the way cleans up after it."""


class DriverFaults:
    """The audit hook: counts the file-system operations under ``root`` while armed, and at the chosen one raises
    ``fault`` (a SimulatedKill, or an OSError for a full disk). Installed once: audit hooks cannot be removed."""

    WRITES = frozenset(
        {"open", "os.rename", "os.replace", "os.remove", "os.unlink", "os.mkdir", "shutil.rmtree", "os.rmdir"}
    )

    def __init__(self) -> None:
        self.root: str | None = None
        self.at = 0
        self.seen = {"all": 0, "writes": 0}
        self.counter = "all"
        self.fault: BaseException | None = None
        sys.addaudithook(self._hook)

    def arm(self, root: Path, at: int = 0, fault: BaseException | None = None, counter: str = "all") -> None:
        """Count from now; at the ``at``-th operation of ``counter`` ("all", or "writes": opens for writing)."""
        self.root, self.at, self.fault, self.counter = str(root), at, fault, counter
        self.seen = {"all": 0, "writes": 0}

    def disarm(self) -> dict[str, int]:
        self.root = None
        return dict(self.seen)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.root is None or event not in self.WRITES or not args or not str(args[0]).startswith(self.root):
            return
        self.seen["all"] += 1
        if event == "open" and len(args) > 1 and isinstance(args[1], str) and args[1][:1] in "wax":
            self.seen["writes"] += 1
        elif self.counter == "writes":
            return
        if self.seen[self.counter] == self.at and self.fault is not None:
            fault, self.root = self.fault, None  # one shot: the cleanup after it runs unhindered
            raise fault


@pytest.fixture(scope="module")
def faults() -> DriverFaults:
    return _FAULTS


_FAULTS = DriverFaults()


@pytest.fixture(scope="module")
def run_args(small_jpeg_args: Callable[..., list[str]]) -> Callable[..., list[str]]:
    return lambda out, *extra: small_jpeg_args(out, f"run.steps={FAULTED_STEP}", *extra)


def _patch_save(patch: pytest.MonkeyPatch, faults: DriverFaults, plan: dict[str, Any]) -> None:
    """The driver's save of FAULTED_STEP runs with the audit hook armed as ``plan`` says; ``plan["seen"]`` gets
    how many operations it made."""
    real = Trainer.save_checkpoint

    def save(self: Trainer, group: WorkerGroup, run_dir: Path, step: int) -> Path:
        if step != FAULTED_STEP or "counter" not in plan:
            return real(self, group, run_dir, step)
        faults.arm(checkpoint.checkpoints_dir(run_dir), plan["at"], plan["fault"], plan["counter"])
        try:
            return real(self, group, run_dir, step)
        finally:
            plan["seen"] = faults.disarm()

    patch.setattr(Trainer, "save_checkpoint", save)


@pytest.fixture
def fault_step_save(monkeypatch: pytest.MonkeyPatch, faults: DriverFaults) -> Iterator[Callable[..., None]]:
    """``arm(at, fault, counter)``: fault the driver's save of FAULTED_STEP at its ``at``-th operation."""
    plan: dict[str, Any] = {}
    _patch_save(monkeypatch, faults, plan)
    yield lambda at, fault, counter="all": plan.update(at=at, fault=fault, counter=counter)
    faults.disarm()


@pytest.fixture(scope="module")
def reference(run_args: Callable[..., list[str]], ray_cluster: None, tmp_path_factory, faults: DriverFaults) -> dict:
    """The uninterrupted run, and how many driver operations (all, writes) its step-2 save made."""
    out = tmp_path_factory.mktemp("faults") / "reference"
    plan: dict[str, Any] = {"at": 0, "fault": None, "counter": "all"}
    with pytest.MonkeyPatch.context() as patch:
        _patch_save(patch, faults, plan)
        assert main(run_args(out)) == 0
    assert plan["seen"]["writes"] >= 3, plan
    return {"dir": out, **plan["seen"]}


def rows(run_dir: Path) -> dict[int, dict]:
    found = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: {k: v for k, v in r.items() if not k.startswith("perf/")} for r in found if "event" not in r}


def manifest(step_dir: Path) -> dict:
    return json.loads((step_dir / MANIFEST).read_text())["files"]


def check_and_resume(out: Path, reference: dict, run_args: Callable[..., list[str]]) -> None:
    """The three promises after a fault: see the module docstring."""
    for step_dir in checkpoint.list_checkpoints(out):  # every checkpoint left in place is whole
        assert verify_checkpoint(step_dir).status == "verified", step_dir
    # step_1 holds what the uninterrupted run's step_1 holds (the diffusers LoRA file aside: its metadata is not
    # byte-stable across runs; the manifest check above proves it is as written)
    same = [manifest(run / "checkpoints" / "step_1") for run in (out, reference["dir"])]
    assert [{k: v for k, v in m.items() if k != "pytorch_lora_weights.safetensors"} for m in same] == [
        {k: v for k, v in same[1].items() if k != "pytorch_lora_weights.safetensors"}
    ] * 2
    latest = checkpoint.latest_checkpoint(out)
    assert latest is not None and verify_checkpoint(latest).status == "verified"
    assert main(run_args(out, 'run.resume="auto"')) == 0
    expected, got = rows(reference["dir"]), rows(out)
    assert got == expected
    COUNTS["resumed runs equal to the uninterrupted one"] += 1


def _points(total: int, count: int, salt: int) -> list[int]:
    """``count`` distinct operation indices in 1..total (seeded), the last one always among them."""
    rng = random.Random(SEED * 1000 + salt)
    chosen = {total, *rng.sample(range(1, total), min(total - 1, max(count - 1, 0)))}
    return sorted(chosen)


@pytest.fixture(scope="module", autouse=True)
def report() -> Iterator[None]:
    yield
    path = os.environ.get("OMNI_RL_CHAOS_REPORT")
    if path:
        Path(path).write_text(json.dumps({"points": POINTS, "seed": SEED, **COUNTS}, indent=1) + "\n")


# -- kills and a full disk during a save -------------------------------------------------------------------------
def test_driver_killed_at_points_of_a_save(
    reference: dict, run_args: Callable[..., list[str]], fault_step_save: Callable[..., None], tmp_path: Path
) -> None:
    for i, at in enumerate(_points(reference["all"], POINTS, salt=1)):
        out = tmp_path / f"kill_{i}"
        fault_step_save(at, SimulatedKill(f"killed at operation {at}"))
        with pytest.raises(SimulatedKill):
            main(run_args(out))
        fault_step_save(0, None)
        check_and_resume(out, reference, run_args)
        COUNTS["driver kills survived"] += 1


@pytest.mark.slow  # over 30 s; runs in `nox -s integration` (and the chaos session for faults)
def test_a_full_disk_during_a_save_keeps_the_previous_checkpoint(
    reference: dict, run_args: Callable[..., list[str]], fault_step_save: Callable[..., None], tmp_path: Path, capsys
) -> None:
    for i, at in enumerate(_points(reference["writes"], max(POINTS // 2, 1), salt=2)):
        out = tmp_path / f"full_{i}"
        fault_step_save(at, OSError(errno.ENOSPC, "No space left on device"), "writes")
        code = main(run_args(out))
        fault_step_save(0, None)
        text = " ".join(capsys.readouterr().err.split())
        if code == 1:  # a write before the checkpoint was complete: refused, staging removed
            assert f"could not write the checkpoint of step {FAULTED_STEP}" in text and "No space left" in text
            assert not list((out / "checkpoints").glob(".tmp_step_*"))
        check_and_resume(out, reference, run_args)
        COUNTS["disk-full saves"] += 1


@pytest.mark.slow  # over 30 s; runs in `nox -s integration` (and the chaos session for faults)
def test_a_worker_killed_while_it_writes(
    reference: dict, run_args: Callable[..., list[str]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_call = WorkerGroup.call
    rng = random.Random(SEED * 1000 + 3)
    for i in range(max(POINTS // 2, 1)):
        out = tmp_path / f"worker_{i}"
        delay = 0.0 if i == 0 else rng.uniform(0.0, 0.02)  # the first at once: inside the save

        def call(self: WorkerGroup, method: str, *args: Any, delay: float = delay) -> list[Any]:
            if method == "save_state" and f"step_{FAULTED_STEP}" in str(args[0]):
                threading.Timer(delay, _kill, (int(self.infos[0]["pid"]),)).start()
            return real_call(self, method, *args)

        monkeypatch.setattr(WorkerGroup, "call", call)
        code = main(run_args(out))
        monkeypatch.setattr(WorkerGroup, "call", real_call)
        assert code in (0, 1)  # 0: the kill came after the worker's last write (then the run had ended)
        check_and_resume(out, reference, run_args)
        COUNTS["worker kills during a save survived" if code == 1 else "worker kills after the save"] += 1


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the run already ended and its workers were stopped
        os.kill(pid, signal.SIGKILL)


# -- damaged files ----------------------------------------------------------------------------------------------
class _Workers:
    """A worker group in-process: each worker reads its files as PolicyWorker.load_state does."""

    def call(self, method: str, directory: str) -> list[bool]:
        reader = CheckpointReader(Path(directory))
        for rel in reader.files or {}:
            if rel.startswith("worker_"):
                reader.read_bytes(rel)
        return [reader.verified]


def _damage(path: Path, how: str, rng: random.Random) -> None:
    data = bytearray(path.read_bytes())
    if how == "flip":
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
    else:
        path.write_bytes(bytes(data[: rng.randrange(len(data))]))


def test_every_file_kind_flipped_or_cut_is_found_and_skipped(reference: dict, tmp_path: Path) -> None:
    from rich.console import Console

    rng = random.Random(SEED * 1000 + 4)
    files = sorted(manifest(reference["dir"] / "checkpoints" / "step_2"))
    kinds = [*files, MANIFEST]
    for trial in range(max(POINTS, 1)):
        for rel in kinds:
            for how in ("flip", "cut", "delete") if rel == MANIFEST else ("flip", "cut"):
                out = tmp_path / f"{trial}_{how}_{rel.replace('/', '_')}"
                shutil.copytree(reference["dir"], out)
                target = out / "checkpoints" / "step_2" / rel
                if how == "delete":
                    target.unlink()
                else:
                    _damage(target, how, rng)
                found = verify_checkpoint(out / "checkpoints" / "step_2")
                assert found.status == "damaged" and found.problem.startswith(rel), (rel, how, found)
                with pytest.raises(CheckpointDamaged):
                    _load_all(out / "checkpoints" / "step_2")
                start = RunStart(out, (out / "checkpoints" / "step_2", out / "checkpoints" / "step_1"), fallback=True)
                resumed = resume(_Workers(), start, Console(file=open(os.devnull, "w")))  # noqa: SIM115
                assert resumed.step == 1 and resumed.verified  # never the damaged one
                assert (out / "checkpoints" / "damaged" / "step_2").is_dir()
                COUNTS["damaged files detected"] += 1
    COUNTS["damaged checkpoints taken as good"] += 0  # each case above asserts it; the report says so


def _load_all(directory: Path) -> None:
    """Everything a resume reads of a checkpoint: the driver's share, then each worker's."""
    read_driver_files(directory)
    _Workers().call("load_state", str(directory))
