"""``[cluster] strategy`` and ``mixed_precision``: their validation, and the FSDP2 lockstep of the update engines
(padding micro-batches weigh nothing) without any process group. Two real FSDP2 workers are tested end to end in
tests/integration/test_fsdp2.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from core_toys import (
    TOY_CONFIG,
    ToyLoss,
    ToyLossConfig,
    ToyModel,
    ToyModelConfig,
    ToyRollout,
    ToyRolloutConfig,
    ToySampler,
    ToySamplerConfig,
)

from omni_rl.batch import ForwardLossInputs, LossOutput
from omni_rl.config import load_config
from omni_rl.config.schema import OptimConfig
from omni_rl.engine.forward_update import ForwardUpdate
from omni_rl.engine.sharding import Shard
from omni_rl.engine.trajectory_update import TrajectoryUpdate
from omni_rl.errors import ConfigError
from omni_rl.protocols import LossRequirements, RolloutRequest
from omni_rl.registry import Registry

WriteConfig = Callable[..., Path]


def _load(write_config: WriteConfig, registry: Registry, cluster: str) -> object:
    return load_config(write_config(TOY_CONFIG + "\n[cluster]\n" + cluster), registry=registry)


def _problems(exc: ConfigError) -> list[str]:
    return [line[4:] for line in exc.message.splitlines() if line.startswith("  - ")]


# -- config ------------------------------------------------------------------------------------------------


def test_ddp_without_mixed_precision_is_the_default(write_config: WriteConfig, toy_registry: Registry) -> None:
    config = load_config(write_config(TOY_CONFIG), registry=toy_registry)
    assert (config.cluster.strategy, config.cluster.mixed_precision) == ("ddp", "no")


@pytest.mark.parametrize(
    "cluster",
    ['strategy = "fsdp2"', 'strategy = "fsdp2"\nmixed_precision = "bf16"\ngpus_per_worker = 1', 'strategy = "ddp"'],
)
def test_valid_strategies(write_config: WriteConfig, toy_registry: Registry, cluster: str) -> None:
    _load(write_config, toy_registry, cluster)


@pytest.mark.parametrize(
    ("cluster", "problem"),
    [
        ('strategy = "zero3"', "invalid value: expected one of 'ddp', 'fsdp2', got 'zero3' @ $.cluster.strategy"),
        ('strategy = "FSDP2"', "invalid value: expected one of 'ddp', 'fsdp2', got 'FSDP2' @ $.cluster.strategy"),
        (
            'mixed_precision = "fp16"',
            "invalid value: expected one of 'no', 'bf16', got 'fp16' @ $.cluster.mixed_precision",
        ),
        (
            'mixed_precision = "bf16"\ngpus_per_worker = 1',
            'invalid value: mixed_precision = "bf16" needs strategy = "fsdp2" (got strategy = "ddp"); with "ddp" set '
            'the model\'s own dtype instead, e.g. [model] options.dtype = "bfloat16" @ $.cluster.mixed_precision',
        ),
        (
            'strategy = "fsdp2"\nmixed_precision = "bf16"',
            'invalid value: mixed_precision = "bf16" needs GPU workers (gpus_per_worker > 0): on CPU it would only '
            'make the run slower and less exact; use mixed_precision = "no" @ $.cluster.mixed_precision',
        ),
    ],
)
def test_invalid_strategies_are_reported_with_their_path(
    write_config: WriteConfig, toy_registry: Registry, cluster: str, problem: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(write_config, toy_registry, cluster)
    assert _problems(caught.value) == [problem]


def test_fsdp2_needs_even_prompt_shards(write_config: WriteConfig, toy_registry: Registry, tmp_path: Path) -> None:
    """Checked with the config (so `omni-rl check` reports it), not when the run starts."""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("a\nb\nc\n")
    text = TOY_CONFIG + f'\n[data]\ntrain = "{prompts}"\nprompts_per_step = 3\n\n[cluster]\nworkers = 2\n'
    load_config(write_config(text), registry=toy_registry)  # DDP: uneven shards are fine
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(text + 'strategy = "fsdp2"\n'), registry=toy_registry)
    assert "prompts_per_step (3) to be a multiple of [cluster] workers (2)" in caught.value.message
    assert "@ $.data.prompts_per_step" in caught.value.message


def test_bf16_keeps_the_transformers_inputs_uncast() -> None:
    """The root unit must not cast its inputs to bfloat16: the timestep (sigma x 1000) would lose its low bits.
    The blocks compute in bfloat16 and hand float32 back to the root's own layers."""
    from omni_rl.engine.fsdp import mixed_precision_policies

    assert mixed_precision_policies("no") is None
    policies = mixed_precision_policies("bf16")
    assert policies is not None
    units, root = policies
    assert root.cast_forward_inputs is False
    assert root.param_dtype is None and root.reduce_dtype == torch.float32
    assert units.param_dtype == torch.bfloat16 and units.output_dtype == torch.float32 and units.cast_forward_inputs
    # why: bfloat16 rounds neighbouring timesteps together (steps of 4 between 512 and 1024)
    sigma_1000 = torch.tensor([999.0, 998.0])
    assert torch.equal(sigma_1000.bfloat16().float(), torch.tensor([1000.0, 1000.0]))


def test_fewer_prompts_than_workers_is_a_config_error(write_config: WriteConfig, toy_registry: Registry) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(
            write_config(TOY_CONFIG + "\n[data]\nprompts_per_step = 1\n\n[cluster]\nworkers = 2\n"),
            registry=toy_registry,
        )
    assert _problems(caught.value) == [
        "invalid value: prompts_per_step = 1 is fewer than [cluster] workers = 2: each worker samples whole prompt "
        "groups, so use at least one prompt per worker per step @ $.data.prompts_per_step"
    ]
    assert "@ $.data.prompts_per_step" in caught.value.message


# -- lockstep: padding passes change nothing -------------------------------------------------------------------


def _pad(extra: int) -> Callable[[list[int]], list[int]]:
    """A stand-in for the all-reduce MAX: as if another worker needed ``extra`` more micro-batches each time."""
    return lambda counts: [c + extra for c in counts]


def _count_forwards(model: ToyModel) -> list[int]:
    """A list that grows by one at every forward of ``model``."""
    calls: list[int] = []
    forward = model.predict_velocity

    def counted(*args: object, **kwargs: object) -> torch.Tensor:
        calls.append(1)
        return forward(*args, **kwargs)

    model.predict_velocity = counted  # type: ignore[method-assign]
    return calls


def _trajectory_run(lockstep: Callable[[list[int]], list[int]] | None) -> tuple[torch.Tensor, dict, int]:
    torch.manual_seed(0)
    model = ToyModel(ToyModelConfig(channels=4))
    sampler = ToySampler(ToySamplerConfig())
    request = RolloutRequest(
        prompts=["a", "a", "b", "b"],
        group_ids=[2, 2, 3, 3],
        seeds=[1, 2, 3, 4],
        step=1,
        mode="train",
        record_trajectory=True,
        run_seed=0,
    )
    batch = ToyRollout(ToyRolloutConfig()).generate(model, sampler, request)
    calls = _count_forwards(model)
    optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=1e-2)
    engine = TrajectoryUpdate(
        model, sampler, ToyLoss(ToyLossConfig()), optimizer, OptimConfig(micro_batch=1, mini_batch=4), lockstep=lockstep
    )
    # this worker holds samples 4-7 of 8 (groups 2 and 3): each global mini-batch of 4 holds 0 to 4 of them
    shard = Shard([4, 5, 6, 7], [0, 0, 1, 1, 2, 2, 3, 3])
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])
    stats = engine.run(batch, advantages, {}, generator=torch.Generator().manual_seed(3), shard=shard)
    return model.transformer.lora.detach().clone(), stats, len(calls)


def test_trajectory_padding_passes_weigh_nothing() -> None:
    plain_weights, plain_stats, plain_calls = _trajectory_run(None)
    padded_weights, padded_stats, padded_calls = _trajectory_run(_pad(2))
    assert padded_calls > plain_calls  # the padding forwards ran
    assert plain_weights.abs().sum() > 0
    assert torch.equal(padded_weights, plain_weights)
    assert padded_stats == plain_stats  # and were not counted in the metrics


class _ForwardLoss:
    """Flow matching on x0 at a fixed t: the current view with gradients, the reference without."""

    requirements = LossRequirements(inputs="forward", views=frozenset({"current", "reference"}), timesteps=2)

    def prepare(self, rewards: torch.Tensor, advantages: torch.Tensor, group_ids: torch.Tensor) -> dict:
        return {}

    def __call__(self, inputs: ForwardLossInputs) -> LossOutput:
        t = torch.full((inputs.x0.shape[0],), 0.5)
        x_t = 0.5 * inputs.x0
        v = inputs.velocity("current", x_t, t)
        with torch.no_grad():
            ref = inputs.velocity("reference", x_t, t)
        loss = (inputs.advantages.view(-1, 1, 1, 1) * (v - ref - inputs.x0) ** 2).mean()
        return LossOutput(loss=loss, metrics={"v": float(v.detach().mean())})


def _forward_run(lockstep: Callable[[list[int]], list[int]] | None) -> tuple[torch.Tensor, dict, int]:
    torch.manual_seed(0)
    model = ToyModel(ToyModelConfig(channels=4))
    request = RolloutRequest(
        prompts=["a", "b", "c"], group_ids=[0, 1, 2], seeds=[1, 2, 3], step=1, mode="eval", run_seed=0
    )
    batch = ToyRollout(ToyRolloutConfig()).generate(model, ToySampler(ToySamplerConfig()), request)
    calls = _count_forwards(model)
    optimizer = torch.optim.AdamW(model.trainable_parameters(), lr=1e-2)
    engine = ForwardUpdate(
        model, _ForwardLoss(), optimizer, OptimConfig(micro_batch=2, mini_batch=3), seed=0, lockstep=lockstep
    )
    shard = Shard([0, 1, 2], [0, 1, 2, 3, 4, 5])
    advantages = torch.tensor([1.0, -1.0, 0.5])
    stats = engine.run(
        batch, torch.zeros(3), advantages, {}, step=1, generator=torch.Generator().manual_seed(3), shard=shard
    )
    return model.transformer.lora.detach().clone(), stats, len(calls)


def test_forward_padding_passes_weigh_nothing() -> None:
    plain_weights, plain_stats, plain_calls = _forward_run(None)
    padded_weights, padded_stats, padded_calls = _forward_run(_pad(1))
    assert padded_calls > plain_calls
    assert plain_weights.abs().sum() > 0
    assert torch.equal(padded_weights, plain_weights)
    assert padded_stats == plain_stats
