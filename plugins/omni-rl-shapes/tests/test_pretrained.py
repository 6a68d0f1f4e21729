"""The shipped pretrained pipelines (SD3 and Qwen-Image): small, loadable by path offline, and their val reward in
[0.3, 0.6] as recorded."""

from __future__ import annotations

import json
from pathlib import Path

import omni_rl_shapes
import pytest
from omni_rl_shapes.evaluate import RECORD_FILE, read_record, settings_from_record, val_reward
from omni_rl_shapes.pretraining.reproduce import recorded_args

MAX_PACKAGE_BYTES = 20 * 2**20
ARCHS = ("sd3", "qwen_image")


def _bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_package_data_is_at_most_20_mb() -> None:
    package = Path(omni_rl_shapes.__file__).parent
    assert _bytes(package) <= MAX_PACKAGE_BYTES  # both pipelines, the prompts and the code together


@pytest.mark.parametrize("arch", ARCHS)
def test_record_says_how_it_was_trained(arch: str) -> None:
    path = omni_rl_shapes.pretrained_path(arch)
    record = read_record(path)
    assert recorded_args(record["command"])  # python -m omni_rl_shapes.pretrain (as recorded) and its arguments
    assert record.get("arch", "sd3") == arch
    assert {"seed", "wall_time_s", "transformer", "vae", "sampling", "val", "evals"} <= set(record)
    assert record["transformer"]["steps"] > 0
    # each continued stage names the one it started from, back to the from-scratch stage with the VAE recipe
    stage, stages = record, 1
    while stage.get("init_from"):
        stage, stages = stage["init_from"], stages + 1
        assert recorded_args(stage["command"])
    assert stage["vae"]["val_reconstruction_reward"] >= 0.99
    # a clean stage first, stray objects last (README, "Stray objects")
    assert 0.0 < record["stray_rate"] <= 1.0 and not stage.get("stray_rate") and stages >= 2
    marker = json.loads((path / "omni_rl_tiny.json").read_text())
    assert marker["random_weights"] is False and marker["record"] == RECORD_FILE


def test_sd3_plugin_accepts_the_directory() -> None:
    from omni_rl_sd3.loading import check_pipeline_dir

    check_pipeline_dir(omni_rl_shapes.pretrained_path())


def test_an_unknown_architecture_is_named() -> None:
    with pytest.raises(ValueError, match="arch must be one of"):
        omni_rl_shapes.pretrained_path("flux")


def test_a_model_in_a_package_not_installed_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """The motion model ships in its own package (omni-rl-shapes-motion); without it the error says what to install."""
    monkeypatch.setitem(omni_rl_shapes.PRETRAINED_DIRS, "wan", ("omni_rl_no_such_package", "pretrained_wan_motion"))
    with pytest.raises(FileNotFoundError, match=r"not installed \(pip install omni-rl-no-such-package\)"):
        omni_rl_shapes.pretrained_path("wan")
    assert omni_rl_shapes.pretrained_package_path("wan") == "package:omni_rl_no_such_package:pretrained_wan_motion"


@pytest.mark.usefixtures("one_thread")
def test_sd3_val_reward_is_in_band(monkeypatch: pytest.MonkeyPatch) -> None:
    """Re-measure what the record claims, with the recorded sampling settings (about 20 s on one core)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from diffusers import StableDiffusion3Pipeline

    path = omni_rl_shapes.pretrained_path()
    record = read_record(path)
    pipe = StableDiffusion3Pipeline.from_pretrained(path)
    pipe.set_progress_bar_config(disable=True)
    metrics = val_reward(pipe, omni_rl_shapes.read_prompts("val"), settings_from_record(record))
    assert 0.3 <= metrics["score"] <= 0.6
    # the same number as recorded, up to float differences between machines and thread counts
    assert metrics["score"] == pytest.approx(record["val"]["score"], abs=0.03)


@pytest.mark.usefixtures("one_thread")
def test_qwen_image_val_reward_is_in_band(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for the Qwen-Image pipeline, loaded as the ``qwen_image`` model by its package path (the loader
    a run uses; float16 weights upcast to float32) and sampled as the pretraining evaluated it (~8 s)."""
    pytest.importorskip("omni_rl_qwen_image")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from omni_rl_shapes.evaluate import model_val_reward

    import omni_rl
    from omni_rl.context import BuildContext

    record = read_record(omni_rl_shapes.pretrained_path("qwen_image"))
    settings = settings_from_record(record)
    options = {
        "path": "package:omni_rl_shapes:pretrained_qwen_image",
        "lora_rank": 0,
        "max_sequence_length": settings.max_sequence_length,
    }
    model = omni_rl.build("model", "qwen_image", options, BuildContext(device="cpu"))
    metrics = model_val_reward(model, omni_rl_shapes.read_prompts("val"), settings)
    assert 0.3 <= metrics["score"] <= 0.6
    assert metrics["score"] == pytest.approx(record["val"]["score"], abs=0.03)
