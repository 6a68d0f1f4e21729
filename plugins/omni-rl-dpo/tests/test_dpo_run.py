"""End to end through the real loop (CLI, Ray worker, rollout, rewards, prepare, forward update, checkpoint):
online DPO from the shapes example, and offline DPO from a preference file written here."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from omni_rl.cli import main
from omni_rl.testing.ray import local_ray

EXAMPLE = Path(__file__).parents[3] / "docs" / "examples" / "shapes_dpo.toml"
DPO_METRICS = (
    "actor/implicit_acc",
    "actor/reward_margin",
    "actor/reward_chosen",
    "actor/reward_rejected",
    "actor/policy_mse",
    "actor/reference_mse",
    "actor/pairs",
    "actor/groups_skipped",
)


@pytest.fixture(scope="module")
def ray_cluster():
    """One embedded Ray for both runs (a start costs seconds); the runs reuse it."""
    with local_ray():  # the whole-repo test session may already run one: then it is reused
        yield


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def _check_first_step(row: dict) -> None:
    """Before the first optimizer step the LoRA is zero, so policy = reference: inside = 0 and L = log 2."""
    for key in DPO_METRICS:
        assert key in row, key
    assert row["actor/loss"] == pytest.approx(math.log(2.0), rel=1e-5)
    assert row["actor/policy_mse"] == pytest.approx(row["actor/reference_mse"], rel=1e-6)
    assert row["actor/implicit_acc"] == 0.0


@pytest.mark.parametrize(("pairing", "pairs"), [("reward", (2.0, 2.0)), ("all_pairs", (3.0, 12.0))])
def test_online_dpo_runs_the_shapes_example(
    tmp_path: Path, tiny_sd3_path: Path, ray_cluster: None, pairing: str, pairs: tuple[float, float]
) -> None:
    """Best/worst pairs (2 groups: 2 pairs) and every pair of a group (up to 6 in a group of 4, fewer where two
    JPEG sizes tie)."""
    out = tmp_path / "online"
    overrides = {
        "run.steps": "2",
        "run.output_dir": str(out),
        "run.eval_every": "0",
        "run.eval_before_training": "false",
        "model.name": '"sd3"',  # the example's model is the Qwen-Image shapes one
        "model.options.path": str(tiny_sd3_path),
        "reward.0.name": '"jpeg_compressibility"',  # the random tiny model scores 0 on shapes: no pairs
        "rollout.options.group_size": "4",
        "rollout.options.steps": "3",
        "data.prompts_per_step": "2",
        "loss.options.min_reward_spread": "0.0",
        "loss.options.pairing": f'"{pairing}"',
        "log.image_every": "0",
    }
    args = ["run", str(EXAMPLE)]
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    assert main(args) == 0
    rows = _rows(out)
    assert [row["step"] for row in rows] == [1, 2]
    _check_first_step(rows[0])
    assert pairs[0] <= rows[0]["actor/pairs"] <= pairs[1] and rows[0]["actor/groups_skipped"] == 0.0
    assert rows[1]["actor/policy_mse"] != rows[1]["actor/reference_mse"]  # the policy moved
    assert (out / "checkpoints" / "step_2" / "pytorch_lora_weights.safetensors").exists()


OFFLINE_CONFIG = """
[run]
steps = 2
seed = 0
output_dir = "{out}"

[cluster]
cpus_per_worker = 1

[data]
train = "{train}"
prompts_per_step = 2

[algorithm]
name = "dpo_offline"

[model]
name = "sd3"
options = {{ path = "{model}", lora_rank = 4 }}

[rollout]
name = "preference_pairs"
options = {{ height = 32, width = 32 }}

[[reward]]
name = "jpeg_compressibility"

[loss]
name = "dpo"
options = {{ beta = 1000.0 }}

[optim]
lr = 1e-3
micro_batch = 8
"""


def _as_parquet(jsonl: Path) -> Path:
    """The same pairs as a .parquet file whose image columns hold the PNG bytes (raw, and as HuggingFace
    datasets' Image struct), so the run reads no image file."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    columns = {
        "prompt": [line["prompt"] for line in lines],
        "chosen": [Path(line["chosen"]).read_bytes() for line in lines],
        "rejected": [{"bytes": Path(line["rejected"]).read_bytes(), "path": None} for line in lines],
    }
    path = jsonl.with_suffix(".parquet")
    pq.write_table(pa.table(columns), path)
    return path


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
def test_offline_dpo_runs_from_a_preference_file(
    tmp_path: Path, tiny_sd3_path: Path, preference_set, ray_cluster: None, file_format: str
) -> None:
    train = preference_set(tmp_path / "prefs", ["a red square", "a blue circle", "a green triangle"])
    if file_format == "parquet":
        train = _as_parquet(train)
        for image in (tmp_path / "prefs").glob("*.png"):
            image.unlink()  # the bytes in the file are all the run has
    out = tmp_path / "offline"
    config = tmp_path / "offline.toml"
    config.write_text(OFFLINE_CONFIG.format(out=out, train=train, model=tiny_sd3_path), encoding="utf-8")
    assert main(["run", str(config)]) == 0
    rows = _rows(out)
    assert [row["step"] for row in rows] == [1, 2]
    _check_first_step(rows[0])
    for row in rows:  # every line of the file is a pair; nothing is skipped
        assert row["actor/pairs"] == 2.0 and row["actor/groups_skipped"] == 0.0
    # plain colours against noise is an easy preference: one step already favours the chosen images
    assert rows[1]["actor/loss"] < math.log(2.0) - 0.02
    assert rows[1]["actor/reward_margin"] > 0 and rows[1]["actor/implicit_acc"] == 1.0
    resolved = (out / "config.resolved.toml").read_text()
    assert 'pairing = "offline"' in resolved and 'name = "preference_pairs"' in resolved


def _shrunk(example: Path, out: Path, model: Path, steps: int = 3, **extra: str) -> list[str]:
    """``omni-rl run`` arguments for ``steps`` shrunk steps of a shapes example on the tiny SD3."""
    overrides = {
        "run.steps": str(steps),
        "run.output_dir": str(out),
        "run.eval_every": "0",
        "run.eval_before_training": "false",
        "model.name": '"sd3"',
        "model.options.path": str(model),
        "reward.0.name": '"jpeg_compressibility"',
        "rollout.options.group_size": "3",
        "rollout.options.steps": "3",
        "data.prompts_per_step": "2",
        "log.image_every": "0",
        **extra,
    }
    args = ["run", str(example)]
    for key, value in overrides.items():
        args += ["--set", f"{key}={value}"]
    return args


def test_synced_reference_is_the_policy_at_each_step_start_and_is_checkpointed(
    tmp_path: Path, tiny_sd3_path: Path, ray_cluster: None
) -> None:
    """The on-policy self-check of reference = "synced" with a sync every step and one optimizer step per step:
    each step's update starts with the reference equal to the policy, so every step's loss is log 2 and the two
    errors agree, while the policy does move; the reference adapter ("old") is in the checkpoint."""
    out = tmp_path / "synced"
    extra = {
        "loss.options.reference": '"synced"',
        "loss.options.min_reward_spread": "0.0",
        "loss.options.timesteps": "1",
    }
    assert main(_shrunk(EXAMPLE, out, tiny_sd3_path, **extra)) == 0
    rows = _rows(out)
    assert [row["step"] for row in rows] == [1, 2, 3]
    for row in rows:
        assert row["actor/loss"] == pytest.approx(math.log(2.0), rel=1e-5)
        assert row["actor/policy_mse"] == pytest.approx(row["actor/reference_mse"], rel=1e-5)
        assert row["actor/velocity_norm_ratio"] == pytest.approx(1.0, rel=1e-5)
    from safetensors.torch import load_file

    adapters = load_file(str(out / "checkpoints" / "step_3" / "worker_0" / "adapters.safetensors"))
    assert adapters and all(".old." in name for name in adapters)


def test_the_dgpo_example_runs_three_shrunk_steps(tmp_path: Path, tiny_sd3_path: Path, ray_cluster: None) -> None:
    example = EXAMPLE.with_name("shapes_dgpo.toml")
    out = tmp_path / "dgpo"
    assert main(_shrunk(example, out, tiny_sd3_path)) == 0
    rows = _rows(out)
    assert [row["step"] for row in rows] == [1, 2, 3]
    assert rows[0]["actor/loss"] == pytest.approx(math.log(2.0), rel=1e-5)  # LoRA zero: policy = reference
    assert rows[0]["actor/groups"] == 2.0
    assert rows[2]["actor/policy_mse"] != rows[2]["actor/reference_mse"]
