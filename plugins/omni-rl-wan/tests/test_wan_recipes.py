"""The real-model Wan recipes (docs/examples/wan21_t2v_flow_grpo.toml, wan22_ti2v_dance_grpo.toml): documented as
not run here (no GPU, no hub), so their configs are validated with ``omni-rl check`` against tiny pipelines of the
same layouts, and the published settings they claim are pinned."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tomllib

from omni_rl.cli import main

EXAMPLES = Path(__file__).parents[3] / "docs" / "examples"
PROMPTS = EXAMPLES / "prompts" / "objects.txt"


@pytest.fixture(scope="module")
def tiny_ti2v_path(tiny_wan_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Wan2.2 TI2V-5B's text-to-video layout: one transformer with per-token timesteps (``expand_timesteps``)."""
    path = tmp_path_factory.mktemp("ti2v") / "tiny-ti2v"
    shutil.copytree(tiny_wan_path, path)
    index = json.loads((path / "model_index.json").read_text())
    index["expand_timesteps"] = True
    (path / "model_index.json").write_text(json.dumps(index))
    return path


def _read(example: str) -> dict:
    return tomllib.loads((EXAMPLES / example).read_text())


def _check(example: str, model_path: Path, *, data: bool) -> int:
    sets = [f"model.options.path={model_path}"]
    if data:  # the OCR prompt files ship with the repository; the objects file stands in only where asked
        sets += [f"data.train={PROMPTS}", f"data.val={PROMPTS}"]
    return main(["check", str(EXAMPLES / example), *[arg for value in sets for arg in ("--set", value)]])


def test_wan21_flow_grpo_recipe_passes_check(tiny_wan_path: Path) -> None:
    assert _check("wan21_t2v_flow_grpo.toml", tiny_wan_path, data=False) == 0
    config = _read("wan21_t2v_flow_grpo.toml")
    rollout = config["rollout"]["options"]
    assert (rollout["height"], rollout["width"], rollout["num_frames"]) == (240, 416, 33)
    assert (rollout["steps"], rollout["eval_steps"], rollout["cfg"], rollout["group_size"]) == (20, 50, 4.5, 4)
    assert config["loss"]["options"] == {"clip_ratio": 1e-3, "kl_coef": 0.004}
    assert config["optim"]["lr"] == 1e-4
    model = config["model"]["options"]
    assert (model["lora_rank"], model["lora_alpha"], model["dtype"]) == (32, 64, "bfloat16")
    assert config["sampler"]["options"]["window_size"] == 0  # every step but the last trains
    assert config["reward"][0]["aggregate"] == "mean"


def test_wan22_dance_grpo_recipe_passes_check(tiny_ti2v_path: Path) -> None:
    assert _check("wan22_ti2v_dance_grpo.toml", tiny_ti2v_path, data=True) == 0
    config = _read("wan22_ti2v_dance_grpo.toml")
    assert config["algorithm"]["name"] == "dance_grpo"
    rollout = config["rollout"]["options"]
    assert (rollout["group_size"], rollout["cfg"], rollout["shared_initial_noise"]) == (8, 5.0, True)
    assert (rollout["num_frames"], rollout["height"], rollout["width"]) == (33, 480, 832)
    assert config["loss"]["options"] == {"clip_ratio": 1e-4, "adv_clip_max": 5.0}
    assert (config["optim"]["lr"], config["model"]["options"]["lora_rank"]) == (1e-5, 0)
    assert config["cluster"]["strategy"] == "fsdp2"
