"""Worker checkpoints hold the frozen LoRA adapters (a loss's "old" / "ema" policies) and the update counters,
and still load when written by a version that saved neither."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from omni_rl import checkpoint
from omni_rl.runtime.forward_update import ForwardUpdate
from omni_rl.runtime.worker import PolicyWorker
from omni_rl.schema import OptimConfig


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
