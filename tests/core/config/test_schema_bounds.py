"""The core schema refuses NaN, inf and out-of-range values (issue 33, item 9), each error naming its path, with
the finite/range validators the plugins use (omni_rl.validators); the defaults and ordinary values still load."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import attrs
import pytest
from core_toys import TOY_CONFIG

from omni_rl.config import load_config
from omni_rl.errors import ConfigError
from omni_rl.registry import Registry
from omni_rl.validators import MAX_IMAGE_SIDE, each, finite_between, image_side, int_between, non_empty

WriteConfig = Callable[..., Path]

#: (a --set override, the path its error must name)
REFUSED = [
    ("optim.lr=nan", "$.optim.lr"),
    ("optim.lr=inf", "$.optim.lr"),
    ("optim.lr=0.0", "$.optim.lr"),
    ("optim.weight_decay=nan", "$.optim.weight_decay"),
    ("optim.weight_decay=-inf", "$.optim.weight_decay"),
    ("optim.grad_clip=nan", "$.optim.grad_clip"),
    ("optim.grad_clip=inf", "$.optim.grad_clip"),
    ("optim.eps=nan", "$.optim.eps"),
    ("optim.betas=[nan, 0.999]", "$.optim.betas"),
    ("optim.betas=[0.9, 1.0]", "$.optim.betas"),
    ("optim.betas=[-0.1, 0.999]", "$.optim.betas"),
    ("reward.0.weight=nan", "$.reward[0].weight"),
    ("reward.0.weight=inf", "$.reward[0].weight"),
    ("reward.0.resources={CPU = nan}", "$.reward[0].resources"),
    ("run.seed=-1", "$.run.seed"),
    ("run.steps=1000000000000000000000000000000", "$.run.steps"),
    ("run.save_every=-2", "$.run.save_every"),
    ("run.output_dir=''", "$.run.output_dir"),
    ("run.output_dir='  '", "$.run.output_dir"),
    ("data.prompts_per_step=1000000000000", "$.data.prompts_per_step"),
    ("cluster.gpus_per_worker=nan", "$.cluster.gpus_per_worker"),
    ("cluster.cpus_per_worker=inf", "$.cluster.cpus_per_worker"),
    ("cluster.collective_timeout_s=nan", "$.cluster.collective_timeout_s"),
    ("cluster.workers=100000000", "$.cluster.workers"),
    ("rollout_correction.is_threshold=nan", "$.rollout_correction.is_threshold"),
    ("rollout_correction.rejection_band=[0.5, inf]", "$.rollout_correction.rejection_band"),
]


@pytest.mark.parametrize(("override", "path"), REFUSED)
def test_nan_inf_and_out_of_range_values_are_refused_with_their_path(
    override: str, path: str, write_config: WriteConfig, toy_registry: Registry
) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(TOY_CONFIG), [override], registry=toy_registry)
    problems = [line.strip().removeprefix("- ") for line in caught.value.message.splitlines()[1:]]
    assert len(problems) == 1, problems
    assert problems[0].startswith("invalid value: ") and problems[0].endswith(f" @ {path}")
    assert caught.value.exit_code == 2


def test_the_message_says_the_range(write_config: WriteConfig, toy_registry: Registry) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(write_config(TOY_CONFIG), ["optim.lr=nan", "optim.betas=[0.9, 1.0]"], registry=toy_registry)
    lines = caught.value.message.splitlines()
    assert "  - invalid value: lr must be a finite number > 0, got nan @ $.optim.lr" in lines
    assert "  - invalid value: betas[1] must be a finite number in [0, 1), got 1.0 @ $.optim.betas" in lines


@pytest.mark.parametrize(
    "override",
    ["optim.lr=1.0", "optim.lr=1e-7", "run.seed=4294967295", "reward.0.weight=-2.5", "optim.betas=[0.0, 0.95]"],
)
def test_ordinary_values_still_load(override: str, write_config: WriteConfig, toy_registry: Registry) -> None:
    load_config(write_config(TOY_CONFIG), [override], registry=toy_registry)


@attrs.frozen
class Options:
    side: int = attrs.field(default=512, validator=image_side)
    count: int = attrs.field(default=1, validator=int_between(1, 10))
    share: float = attrs.field(default=0.5, validator=finite_between(0.0, 1.0, low_open=True))
    pair: tuple[float, float] = attrs.field(default=(0.1, 0.2), validator=each(finite_between(0.0, 1.0)))
    name: str = attrs.field(default="x", validator=non_empty)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("side", 10**9, f"side must be a multiple of 8 pixels between 8 and {MAX_IMAGE_SIDE}, got 1000000000"),
        ("side", 12, "multiple of 8"),
        ("side", True, "multiple of 8"),
        ("count", 11, "count must be an integer between 1 and 10, got 11"),
        ("count", 2.0, "count must be an integer"),
        ("share", 0.0, r"share must be a finite number in \(0, 1\], got 0.0"),
        ("share", float("nan"), "got nan"),
        ("pair", (0.1, float("inf")), r"pair\[1\] must be a finite number in \[0, 1\], got inf"),
        ("name", "", "name must not be empty"),
    ],
)
def test_the_shared_validators(field: str, value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Options(**{field: value})
