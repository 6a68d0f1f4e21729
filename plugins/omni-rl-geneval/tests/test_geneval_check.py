"""The ``geneval`` reward's needs found before anything starts (issue 48, N8): through the real ``omni-rl check``, a
model the offline machine cannot load (hub id not in the cache, a file, an incomplete directory) and prompts
without GenEval metadata are each one line naming the config path and the fix, exit 2, no weight loaded; through
``omni-rl serve-reward``, an unloadable model is refused before Ray starts. A config that is only loaded (``eval``
and ``export`` of a run read it on machines without the reward's weights) is not checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import huggingface_hub.constants
import pytest

from omni_rl.cli import main
from omni_rl.config import load_config

ROOT = Path(__file__).parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "sd3_tiny_jpeg.toml"
GENEVAL_PROMPTS = "package:omni_rl_geneval:prompts/train.jsonl"
DETECTOR = "facebook/mask2former-swin-small-coco-instance"
CLIP = "openai/clip-vit-large-patch14"


@pytest.fixture(autouse=True)
def _at_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the example's prompt files are relative to the repository root


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """HF_HUB_OFFLINE=1 with an empty Hugging Face cache (returned, to put models in)."""
    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def check(tmp_path: Path, *overrides: str) -> list[str]:
    args = ["check", str(EXAMPLE), "--set", f"run.output_dir={(tmp_path / 'run').as_posix()}"]
    args += ["--set", "reward.0.name=geneval"]
    for override in overrides:
        args += ["--set", override]
    return args


def tiny(options: dict[str, Any], section: str = "reward.0") -> list[str]:
    return [f"{section}.options.{key}={Path(options[key]).as_posix()}" for key in ("detector", "clip_model")]


def cache_model(cache: Path, repo: str, files: tuple[str, ...]) -> None:
    """``repo`` in the hub cache's layout (refs/main -> a snapshot holding ``files``), as hf download leaves it."""
    folder = cache / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text("0" * 40, encoding="utf-8")
    for name in files:
        (snapshot / name).write_text("{}", encoding="utf-8")


def test_models_not_cached_offline_are_found_by_check(
    offline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(check(tmp_path, f"data.train={GENEVAL_PROMPTS}")) == 2
    err = capsys.readouterr().err
    assert "2 problems" in err and "Traceback" not in err
    for option, repo in (("detector", DETECTOR), ("clip_model", CLIP)):
        (line,) = [line for line in err.splitlines() if f"$.reward[0].options.{option} = {repo!r}" in line]
        assert "HF_HUB_OFFLINE is set" in line and f"`hf download {repo}`" in line
        assert line.endswith(f"@ $.reward[0].options.{option}")


def test_models_in_the_cache_pass_offline(offline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache_model(offline, DETECTOR, ("config.json", "model.safetensors", "preprocessor_config.json"))
    cache_model(offline, CLIP, ("config.json", "pytorch_model.bin", "preprocessor_config.json"))
    assert main(check(tmp_path, f"data.train={GENEVAL_PROMPTS}")) == 0, capsys.readouterr().err


def test_a_cached_model_without_weights_is_found(
    offline: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cache_model(offline, DETECTOR, ("config.json", "preprocessor_config.json"))  # an interrupted download
    cache_model(offline, CLIP, ("config.json", "model.safetensors", "preprocessor_config.json"))
    assert main(check(tmp_path, f"data.train={GENEVAL_PROMPTS}")) == 2
    err = capsys.readouterr().err
    assert "1 problem" in err and "no model.safetensors or model.safetensors.index.json" in err
    assert "options.clip_model" not in err


def test_online_a_hub_id_is_left_to_the_loader(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path))
    assert main(check(tmp_path, f"data.train={GENEVAL_PROMPTS}")) == 0, capsys.readouterr().err


def test_local_paths_that_are_not_model_directories(
    tiny_options: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "weights.safetensors"
    a_file.write_bytes(b"")
    half = tmp_path / "half"
    half.mkdir()
    (half / "config.json").write_text("{}", encoding="utf-8")
    overrides = (f"data.train={GENEVAL_PROMPTS}", f"reward.0.options.detector={a_file.as_posix()}")
    assert main(check(tmp_path, *overrides, f"reward.0.options.clip_model={half.as_posix()}")) == 2
    err = capsys.readouterr().err
    assert "is a file, not a model directory" in err and "@ $.reward[0].options.detector" in err
    assert "is not a saved CLIP model: it has no model.safetensors" in err and "@ $.reward[0].options.clip_model" in err


def test_plain_text_prompts_are_found_by_check(
    tiny_options: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example's objects.txt has no metadata: the reward could not score its first batch."""
    assert main(check(tmp_path, *tiny(tiny_options))) == 2
    err = capsys.readouterr().err
    (line,) = [line for line in err.splitlines() if "GenEval metadata" in line]
    assert "reward 'geneval' ($.reward[0])" in line and "of $.data.train have none that fits" in line
    assert "no metadata: a plain-text prompt" in line and "make_prompts" in line and line.endswith("@ $.data.train")


def test_prompts_with_other_metadata_name_the_first_bad_one(
    tiny_options: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompts = tmp_path / "mixed.jsonl"
    good = {"prompt": "a photo of a cat", "tag": "single_object", "include": [{"class": "cat", "count": 1}]}
    bad = {"prompt": "a photo of a unicorn", "tag": "single_object", "include": [{"class": "unicorn", "count": 1}]}
    prompts.write_text("\n".join(json.dumps(row) for row in (good, bad, bad)) + "\n", encoding="utf-8")
    assert main(check(tmp_path, *tiny(tiny_options), f"data.train={prompts.as_posix()}")) == 2
    err = capsys.readouterr().err
    assert "2 of the 3 prompts of $.data.train" in err and "(prompt 2, 'a photo of a unicorn': clause 0" in err


def test_tiny_models_and_geneval_prompts_pass(
    tiny_options: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(check(tmp_path, *tiny(tiny_options), f"data.train={GENEVAL_PROMPTS}")) == 0, capsys.readouterr().err


def test_an_eval_reward_is_checked_against_the_val_prompts(
    tiny_options: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An [[eval_reward]] scores the val prompts only: plain-text training prompts are fine for it."""
    args = check(tmp_path, "reward.0.name=jpeg_compressibility", "run.eval_every=10")
    args += ["--set", 'eval_reward=[{name = "geneval"}]', "--set", "data.val=docs/examples/prompts/objects.txt"]
    for override in tiny(tiny_options, "eval_reward.0"):
        args += ["--set", override]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "reward 'geneval' ($.eval_reward[0])" in err and "@ $.data.val" in err and "$.data.train" not in err


def test_loading_a_config_checks_nothing_of_the_machine(offline: Path, tmp_path: Path) -> None:
    """`eval RUN_DIR` and `export` load the run's config where the reward's weights may not be: no preflight there."""
    overrides = ["reward.0.name=geneval", "data.train=docs/examples/prompts/objects.txt"]
    config = load_config(EXAMPLE, overrides)
    assert config.rewards[0].name == "geneval"


def test_serve_reward_refuses_an_unloadable_model_before_ray_starts(
    offline: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ray.serve")
    import omni_rl.serving.launch

    def no_ray(config: Any) -> bool:
        raise AssertionError("serve-reward started Ray before refusing the config")

    monkeypatch.setattr(omni_rl.serving.launch, "connect", no_ray)
    path = tmp_path / "serve.toml"
    path.write_text('[server]\nport = 8123\n\n[[reward]]\nname = "geneval"\n', encoding="utf-8")
    assert main(["serve-reward", str(path)]) == 2
    err = capsys.readouterr().err
    assert "serving would fail (2 problems)" in err and "@ $.reward[0].options.detector" in err
    assert f"`hf download {CLIP}`" in err


def test_a_served_reward_on_a_cluster_is_checked_where_it_is_built(offline: Path, tmp_path: Path) -> None:
    """address = "auto": the replicas may run on nodes that hold the cache, so the serve config does not refuse."""
    from omni_rl import get_registry
    from omni_rl.serving import load_serve_config

    path = tmp_path / "serve.toml"
    path.write_text('[server]\naddress = "auto"\n\n[[reward]]\nname = "geneval"\n', encoding="utf-8")
    (served,) = load_serve_config(path, [], get_registry()).rewards
    assert served.component.name == "geneval"


def test_an_id_the_hub_would_refuse_is_one_line(offline: Path) -> None:
    from omni_rl_geneval.preflight import source_problem
    from omni_rl_rewards_clip.loading import Owner

    problem = source_problem("owner..name", Owner("geneval", "$.reward[0]"), "detector")
    assert problem is not None and "is neither an existing path nor a valid hub id" in problem
    assert problem.endswith("@ $.reward[0].options.detector")
