"""``"auto"`` batch sizes (omni_rl.auto_batch): the OOM back-off search, its per-key cache, the CPU rule and the
config checks that name the option's path."""

from __future__ import annotations

import pytest
import torch

from omni_rl import auto_batch
from omni_rl.auto_batch import AutoBatchCache, largest_fitting
from omni_rl.config.converter import shared_converter, structure
from omni_rl.config.schema import OptimConfig
from omni_rl.errors import RuntimeFailure


def fake_oom_above(limit: int, tried: list[int]):
    """A try that raises CUDA's out-of-memory error for sizes above ``limit`` and records every size tried."""

    def try_size(b: int) -> None:
        tried.append(b)
        if b > limit:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory (fake): {b} > {limit}")

    return try_size


@pytest.mark.parametrize(("limit", "upper"), [(3, 16), (16, 16), (1, 16), (7, 8), (5, 5), (12, 13), (9, 100)])
def test_largest_fitting_finds_the_limit(limit: int, upper: int) -> None:
    tried: list[int] = []
    assert largest_fitting(fake_oom_above(limit, tried), upper, "x") == min(limit, upper)
    assert tried[0] == upper  # the whole batch first: most runs fit and pay one try
    assert len(tried) <= 2 * upper.bit_length() + 1


def test_one_sample_that_does_not_fit_says_what_to_change() -> None:
    with pytest.raises(RuntimeFailure, match="one sample does not fit") as error:
        largest_fitting(fake_oom_above(0, []), 8, "[rollout] batch_size")
    assert "gradient_checkpointing" in (error.value.hint or "")


def test_other_errors_are_not_taken_for_out_of_memory() -> None:
    def broken(b: int) -> None:
        raise ValueError("a real bug")

    with pytest.raises(ValueError, match="a real bug"):
        largest_fitting(broken, 8, "x")


def test_cache_probes_once_per_key_and_caps_at_the_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto_batch, "probes_on", lambda device: True)
    cache = AutoBatchCache("[optim] micro_batch")
    tried: list[int] = []
    try_size = fake_oom_above(6, tried)
    assert cache.resolve("a", "cuda", 16, try_size) == 6
    probes = len(tried)
    assert cache.resolve("a", "cuda", 16, try_size) == 6
    assert cache.resolve("a", "cuda", 4, try_size) == 4  # a smaller request never runs a larger chunk
    assert cache.resolve("a", "cuda", 32, try_size) == 6  # memory-limited: a larger request keeps the limit
    assert len(tried) == probes
    assert cache.resolve("b", "cuda", 4, try_size) == 4  # another shape probes again; 4 fitted whole
    assert cache.resolve("b", "cuda", 8, try_size) == 6  # not a memory limit then: probed again for 8


def test_cpu_does_not_probe_and_takes_the_whole_batch() -> None:
    cache = AutoBatchCache("[rollout] batch_size")

    def never(b: int) -> None:
        raise AssertionError("no probe on the CPU")

    assert cache.resolve("a", "cpu", 12, never) == 12
    assert cache.resolve("a", "cpu", 48, never) == 48


@pytest.mark.parametrize("value", [0, -1, "Auto", 2.5, True])
def test_micro_batch_errors_name_the_path(value: object) -> None:
    _, problems = structure(shared_converter(), {"micro_batch": value}, OptimConfig, "$.optim")
    assert problems and all(p.endswith("@ $.optim.micro_batch") for p in problems)


def test_micro_batch_takes_auto_and_numbers() -> None:
    for value in ("auto", 1, 64):
        config, problems = structure(shared_converter(), {"micro_batch": value}, OptimConfig, "$.optim")
        assert not problems and config is not None and config.micro_batch == value
