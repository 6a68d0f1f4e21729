"""Worker checkpoints hold the frozen LoRA adapters (a loss's "old" / "ema" policies) and the update counters,
and still load when written by a version that saved neither."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from omni_rl.config.schema import OptimConfig
from omni_rl.engine.forward_update import ForwardUpdate
from omni_rl.rundir import checkpoint
from omni_rl.runtime.worker import PolicyWorker


class LoraLinear(torch.nn.Module):
    """peft's layout: base weight, then ``lora_A.<adapter>`` / ``lora_B.<adapter>``; only "default" trains."""

    def __init__(self) -> None:
        super().__init__()
        self.base_layer = torch.nn.Linear(3, 3)
        self.lora_A = torch.nn.ModuleDict({n: torch.nn.Linear(3, 2, bias=False) for n in ("default", "old", "ema")})
        self.lora_B = torch.nn.ModuleDict({n: torch.nn.Linear(2, 3, bias=False) for n in ("default", "old", "ema")})
        self.base_layer.requires_grad_(False)
        for name in ("old", "ema"):
            self.lora_A[name].requires_grad_(False)
            self.lora_B[name].requires_grad_(False)


def transformer() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(LoraLinear(), LoraLinear())


def frozen_lora(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in module.named_parameters() if "lora_" in n and not p.requires_grad}


def test_the_frozen_adapters_round_trip_and_nothing_else_is_saved(tmp_path: Path) -> None:
    source = transformer()
    with torch.no_grad():
        for name, param in source.named_parameters():
            if ".old." in name or ".ema." in name:
                param.add_(1.0 + len(name))  # the adapters moved away from their initial copy
    expected = frozen_lora(source)
    path = tmp_path / "adapters.safetensors"
    checkpoint.save_frozen_adapters(source, path)

    from safetensors.torch import load_file

    saved = load_file(str(path))
    assert sorted(saved) == sorted(expected)
    assert len(saved) == 8 and all(".old." in n or ".ema." in n for n in saved)  # no trainable, no base weight

    target = transformer()
    trained_before = {n: p.detach().clone() for n, p in target.named_parameters() if p.requires_grad}
    assert checkpoint.load_frozen_adapters(target, path)
    for name, value in frozen_lora(target).items():
        assert torch.equal(value, expected[name]), name
    for name, param in target.named_parameters():
        if param.requires_grad:
            assert torch.equal(param, trained_before[name]), name


def test_a_checkpoint_without_the_adapters_file_leaves_them_alone(tmp_path: Path) -> None:
    target = transformer()
    before = frozen_lora(target)
    assert not checkpoint.load_frozen_adapters(target, tmp_path / "adapters.safetensors")
    assert all(torch.equal(v, before[n]) for n, v in frozen_lora(target).items())


def test_adapters_of_another_model_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "adapters.safetensors"
    checkpoint.save_frozen_adapters(torch.nn.Sequential(LoraLinear()), path)
    with pytest.raises(ValueError, match="extra LoRA adapters"):
        checkpoint.load_frozen_adapters(transformer(), path)


class CountingLoss:
    """A loss with state of its own behind the optional checkpoint hooks."""

    requirements = None

    def __init__(self) -> None:
        self.blends = 0

    def checkpoint_state(self) -> dict[str, Any]:
        return {"blends": self.blends}

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        self.blends = int(state["blends"])


class Model:
    def __init__(self) -> None:
        self.transformer = transformer()

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.transformer.parameters() if p.requires_grad]

    def save_lora(self, directory: Path) -> None:
        (Path(directory) / "pytorch_lora_weights.safetensors").write_bytes(b"")


def worker() -> PolicyWorker:
    """A policy worker's checkpointed state, without a config, Ray or plugins."""
    w = PolicyWorker.__new__(PolicyWorker)
    w.rank = 0
    w.model = Model()
    w.loss = CountingLoss()
    w.optimizer = torch.optim.AdamW(w.model.trainable_parameters(), lr=1e-2)
    w.scheduler = torch.optim.lr_scheduler.LambdaLR(w.optimizer, lambda _: 1.0)
    w.update_engine = ForwardUpdate(w.model, w.loss, w.optimizer, OptimConfig(), seed=0)
    return w


def test_the_worker_checkpoint_restores_adapters_and_counters(tmp_path: Path) -> None:
    trained = worker()
    with torch.no_grad():
        for name, param in trained.model.transformer.named_parameters():
            if "lora_" in name:
                param.mul_(-3.0)
    trained.update_engine.updates_done = 7
    trained.loss.blends = 5
    trained.save_state(str(tmp_path))
    expected = frozen_lora(trained.model.transformer)

    resumed = worker()
    resumed.load_state(str(tmp_path))
    for name, value in frozen_lora(resumed.model.transformer).items():
        assert torch.equal(value, expected[name]), f"{name} not restored"
    assert resumed.update_engine.updates_done == 7
    assert resumed.loss.blends == 5


def test_a_worker_checkpoint_of_an_older_version_still_loads(tmp_path: Path) -> None:
    trained = worker()
    trained.update_engine.updates_done = 7
    trained.save_state(str(tmp_path))
    own = tmp_path / "worker_0"
    (own / "adapters.safetensors").unlink()
    (own / "update_state.json").unlink()

    resumed = worker()
    initial = frozen_lora(resumed.model.transformer)
    resumed.load_state(str(tmp_path))
    assert all(torch.equal(v, initial[n]) for n, v in frozen_lora(resumed.model.transformer).items())
    assert resumed.update_engine.updates_done == 0 and resumed.loss.blends == 0


# -- publishing: the latest pointer, keep_last, a resume from an older step --------------------------------
def _publish(run_dir: Path, step: int, keep_last: int = 0, branch: str = "first") -> Path:
    """A complete (tiny) checkpoint of ``step`` written the way the trainer writes one."""
    staging = checkpoint.staging_dir(run_dir, step)
    checkpoint.write_json(staging / "trainer_state.json", {"step": step, "branch": branch})
    return checkpoint.publish(run_dir, staging, step, keep_last)


def _live(run_dir: Path) -> list[str]:
    return [p.name for p in checkpoint.list_checkpoints(run_dir)]


def _branch(path: Path) -> str:
    return checkpoint.read_json(path / "trainer_state.json")["branch"]


def _pointer(run_dir: Path) -> str:
    return (checkpoint.checkpoints_dir(run_dir) / checkpoint.LATEST).read_text().strip()


def test_keep_last_prunes_the_oldest_and_latest_names_the_newest(tmp_path: Path) -> None:
    for step in range(1, 5):
        written = _publish(tmp_path, step, keep_last=2)
        assert checkpoint.latest_checkpoint(tmp_path) == written
    assert _live(tmp_path) == ["step_3", "step_4"]
    assert _pointer(tmp_path) == "step_4"
    assert not list(checkpoint.checkpoints_dir(tmp_path).glob(".t*"))  # no staging or trash left behind


def test_keep_last_one_keeps_only_the_checkpoint_just_written(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        _publish(tmp_path, step, keep_last=1)
    assert _live(tmp_path) == ["step_3"]


def test_a_resume_from_an_older_step_never_prunes_the_new_checkpoint(tmp_path: Path) -> None:
    for step in range(1, 7):
        _publish(tmp_path, step)
    # resumed from step_3: the next checkpoint is step 4 of a new branch, while step_4..step_6 of the old exist
    written = _publish(tmp_path, 4, keep_last=2, branch="second")
    assert written == tmp_path / "checkpoints" / "step_4" and _branch(written) == "second"
    assert _pointer(tmp_path) == "step_4"
    assert checkpoint.latest_checkpoint(tmp_path) == written
    assert _live(tmp_path) == ["step_3", "step_4"]
    abandoned = tmp_path / "checkpoints" / checkpoint.ABANDONED
    assert sorted(p.name for p in abandoned.iterdir()) == ["step_4", "step_5", "step_6"]
    assert _branch(abandoned / "step_4") == "first"  # the replaced one is kept aside, not mixed in
    # the new branch goes on; pruning counts only it, and a later rollback replaces the abandoned copies
    _publish(tmp_path, 5, keep_last=2, branch="second")
    assert _live(tmp_path) == ["step_4", "step_5"]
    assert sorted(p.name for p in abandoned.iterdir()) == ["step_4", "step_5", "step_6"]
    assert _branch(abandoned / "step_5") == "first"


def test_a_pointer_to_a_moved_checkpoint_falls_back_to_the_live_branch(tmp_path: Path) -> None:
    """A crash between moving the old branch aside and updating ``latest``: the fallback (the highest
    ``step_<N>``) is a complete checkpoint of the live branch, never an abandoned one."""
    for step in range(1, 7):
        _publish(tmp_path, step)
    _publish(tmp_path, 4, branch="second")
    checkpoint.write_text_atomic(tmp_path / "checkpoints" / checkpoint.LATEST, "step_6\n")
    assert checkpoint.latest_checkpoint(tmp_path) == tmp_path / "checkpoints" / "step_4"


def test_republishing_a_step_replaces_it_whole(tmp_path: Path) -> None:
    for step in (1, 2):
        _publish(tmp_path, step)
    (tmp_path / "checkpoints" / "step_2" / "stale.bin").write_bytes(b"x")
    written = _publish(tmp_path, 2, branch="second")
    assert _branch(written) == "second" and not (written / "stale.bin").exists()
    assert _pointer(tmp_path) == "step_2" and _live(tmp_path) == ["step_1", "step_2"]


def test_an_interrupted_delete_is_finished_by_the_next_publish(tmp_path: Path) -> None:
    _publish(tmp_path, 1)
    leftover = tmp_path / "checkpoints" / ".trash_step_0_123"
    leftover.mkdir()
    (leftover / "trainer_state.json").write_text("{}")
    _publish(tmp_path, 2)
    assert not leftover.exists() and _live(tmp_path) == ["step_1", "step_2"]


# -- the driver's RNG --------------------------------------------------------------------------------------
def _draws() -> tuple[float, float, float]:
    import random

    import numpy as np

    return random.random(), float(np.random.rand()), float(torch.rand(()))


def test_global_rngs_round_trip_without_pickle(tmp_path: Path) -> None:
    checkpoint.seed_global_rngs(7)
    _draws()
    checkpoint.save_rng(tmp_path)
    expected = [_draws() for _ in range(3)]
    checkpoint.seed_global_rngs(8)
    checkpoint.load_rng(tmp_path)
    assert [_draws() for _ in range(3)] == expected
    checkpoint.seed_global_rngs(7)
    first = _draws()
    checkpoint.seed_global_rngs(7)
    assert _draws() == first


class _Group:
    """What save_checkpoint asks of the worker group: write the workers' part into the staging directory."""

    def call(self, method: str, directory: str) -> None:
        assert method == "save_state"
        (Path(directory) / "worker_0").mkdir()


def test_the_trainer_saves_and_restores_the_driver_rng(tmp_path: Path) -> None:
    from omni_rl import load_config
    from omni_rl.train.trainer import Trainer

    example = Path(__file__).parents[3] / "docs" / "examples" / "sd3_tiny_jpeg.toml"
    sets = [f"run.output_dir={tmp_path}", f"model.options.path={tmp_path / 'unused'}", "run.seed=3"]
    trainer = Trainer(load_config(example, sets))
    checkpoint.checkpoints_dir(tmp_path).mkdir()

    trainer._reset_driver_rng(None)  # a fresh run starts from the run seed's stream
    fresh = _draws()
    checkpoint.seed_global_rngs(3)
    assert _draws() == fresh

    _draws()  # the run moved on: the checkpoint holds the state after its step
    saved = trainer.save_checkpoint(_Group(), tmp_path, 1)  # type: ignore[arg-type]
    assert (saved / checkpoint.DRIVER_DIR / "rng.safetensors").is_file()
    expected = [_draws() for _ in range(2)]
    checkpoint.seed_global_rngs(99)
    from omni_rl.rundir.resume import read_driver_files

    _, state, rng = read_driver_files(saved)  # verified against the checkpoint's manifest
    assert state["step"] == 1 and rng is not None
    trainer._reset_driver_rng(rng)
    assert [_draws() for _ in range(2)] == expected
