"""``omni-rl serve-reward`` on the session's local Ray: the ``http`` reward gets the in-process reward's scores
exactly, and a server that goes away is named with its URL, stopping the run with the resume command or (with
``on_error = "zero"``) counted as a failure while training goes on. Also: a VLM judge's API key stays out of
``config.resolved.toml``."""

from __future__ import annotations

import json
import socket
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from omni_rl import get_registry, load_config
from omni_rl.cli import main
from omni_rl.config import write_resolved
from omni_rl.data import PromptRecord
from omni_rl.errors import RuntimeFailure
from omni_rl.rewards.combined import CombinedReward
from omni_rl.serving import load_serve_config
from omni_rl.serving.launch import start_servers
from omni_rl.train.trainer import Trainer

QUICKSTART = Path(__file__).parents[2] / "docs" / "examples" / "quickstart.toml"
VAL = Path(__file__).parents[2] / "plugins" / "omni-rl-shapes" / "src" / "omni_rl_shapes" / "prompts" / "val.txt"
MOTION_VAL = VAL.with_name("motion_val.txt")
CLIP_TINY = Path(__file__).parents[2] / "plugins" / "omni-rl-rewards-clip" / "tests" / "clip_tiny_models.py"


def _tiny_pickscore_section(directory: Path) -> str:
    """A ``[[reward]]`` serving pickscore on a tiny random CLIP (omni-rl-rewards-clip's test builder), or "" when
    that plugin is not installed."""
    import importlib.util

    from omni_rl import get_registry

    if get_registry().find("reward", "pickscore") is None or not CLIP_TINY.is_file():
        return ""
    spec = importlib.util.spec_from_file_location("clip_tiny_models", CLIP_TINY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = module.save_tiny_clip(directory)
    return (
        f'\n[[reward]]\nname = "pickscore"\nresources = {{ CPU = 0.5 }}\n'
        f'options = {{ model = "{path}", processor = "{path}" }}\n'
    )


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _rollout() -> tuple[np.ndarray, list[str]]:
    """Shapes prompts with noise images and a few drawn squares (some sub-scores are not 0)."""
    prompts = VAL.read_text().splitlines()[:6]
    images = np.full((6, 32, 32, 3), 255, dtype=np.uint8)
    images[:, 8:20, 8:20] = np.random.default_rng(0).integers(0, 256, size=(6, 1, 1, 3), dtype=np.uint8)
    return images, prompts


def test_a_served_reward_scores_like_the_in_process_one_until_its_server_goes_away(
    ray_cluster: None, tmp_path: Path
) -> None:
    from ray import serve

    port = _free_port()
    serve_config = tmp_path / "serve.toml"
    serve_config.write_text(
        f'[server]\nport = {port}\n\n[[reward]]\nname = "shapes"\nreplicas = 1\nresources = {{ CPU = 0.5 }}\n'
        "max_batch_size = 4\n"
        '\n[[reward]]\nname = "shapes_motion"\nroute = "motion"\nresources = { CPU = 0.25 }\n'
        + _tiny_pickscore_section(tmp_path / "clip")
    )
    config = load_serve_config(serve_config, [], get_registry())
    try:
        url, motion_url, *others = start_servers(config)
        assert url == f"http://127.0.0.1:{port}/shapes"
        assert json.loads(urllib.request.urlopen(url, timeout=30).read()) == {
            "protocol": "omni-rl-reward/1",
            "reward": "shapes",
            "scores_video": False,
            "reads_conditions": False,
        }
        _a_served_video_reward_gets_whole_videos(motion_url)

        images, prompts = _rollout()
        local = CombinedReward(load_config(QUICKSTART).rewards, None)(images, prompts, [{}] * 6)
        for encoding in ("png", "raw"):
            remote_sets = ['reward.0.name="http"', f'reward.0.options={{url = "{url}", image_encoding = "{encoding}"}}']
            remote = CombinedReward(load_config(QUICKSTART, remote_sets).rewards, None)
            scored = remote(images, prompts, [{}] * 6)
            np.testing.assert_array_equal(scored.total, local.total)
            assert scored.details["http"].keys() == local.details["shapes"].keys()
            for key, values in local.details["shapes"].items():
                np.testing.assert_array_equal(scored.details["http"][key], values)
        assert np.ptp(local.details["shapes"]["position"]) > 0 or np.ptp(local.total) > 0  # not all-equal zeros
        for served, other_url in zip(config.rewards[2:], others, strict=True):  # a tiny pickscore, when installed
            expected = served.component.build(None)(images, prompts, [{}] * 6)
            http_sets = ['reward.0.name="http"', f'reward.0.options={{url = "{other_url}"}}']
            got = CombinedReward(load_config(QUICKSTART, http_sets).rewards, None)(images, prompts, [{}] * 6)
            np.testing.assert_allclose(got.total, np.asarray(expected.scores), rtol=1e-6)
            assert np.ptp(got.total) > 0
    finally:
        serve.shutdown()  # the server goes away

    sets = [f"run.output_dir={tmp_path / 'run'}", 'reward.0.name="http"', f'reward.0.options={{url = "{url}"}}']
    trainer = Trainer(load_config(QUICKSTART, [*sets, "reward.0.options.max_retries=0"]))
    records = [PromptRecord(prompt=p) for p in prompts]
    with pytest.raises(RuntimeFailure) as caught:
        trainer._score(images, records, prompts, tmp_path / "run")
    assert f"the reward server at {url} did not score the batch" in caught.value.message
    assert f"resume with: omni-rl run {tmp_path / 'run' / 'config.resolved.toml'} --set run.resume=auto" in str(
        caught.value.hint
    )

    tolerant = CombinedReward(load_config(QUICKSTART, [*sets, 'reward.0.on_error="zero"']).rewards, None)
    scored = tolerant(images, prompts, [{}] * 6)
    assert scored.total.tolist() == [0.0] * 6 and scored.metrics()["reward/http/failures"] == 1.0


def _a_served_video_reward_gets_whole_videos(url: str) -> None:
    """``shapes_motion`` (it scores whole clips) behind serve-reward: GET says so, ``http`` with ``scores_video``
    gets the in-process scores and sub-scores exactly, and without it the run's frames are refused by name."""
    from omni_rl_shapes.motion.render import render_clip

    assert json.loads(urllib.request.urlopen(url, timeout=30).read())["scores_video"] is True
    prompts = MOTION_VAL.read_text().splitlines()[:4]
    clips = np.stack([render_clip(p, seed=k, flaw="flicker" if k % 2 else None) for k, p in enumerate(prompts)])
    base = ['reward.0.name="shapes_motion"', "reward.0.options={}"]
    local = CombinedReward(load_config(QUICKSTART, base).rewards, None)(clips, prompts, [{}] * 4)
    assert np.ptp(local.total) > 0
    for encoding in ("png", "raw"):
        options = f'{{url = "{url}", image_encoding = "{encoding}", scores_video = true}}'
        http_sets = ['reward.0.name="http"', f"reward.0.options={options}"]
        remote = CombinedReward(load_config(QUICKSTART, http_sets).rewards, None)
        scored = remote(clips, prompts, [{}] * 4)
        np.testing.assert_array_equal(scored.total, local.total)
        for key, values in local.details["shapes_motion"].items():
            np.testing.assert_array_equal(scored.details["http"][key], values)
    frame_sets = ['reward.0.name="http"', f'reward.0.options={{url = "{url}", max_retries = 0}}']
    frames = CombinedReward(load_config(QUICKSTART, frame_sets).rewards, None)
    with pytest.raises(RuntimeFailure, match=r"scores whole videos .* options\.scores_video = true"):
        frames(clips, prompts, [{}] * 4)


def test_serve_reward_reports_config_problems_by_path(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "serve.toml"
    bad.write_text('[server]\nport = 0\n\n[[reward]]\nname = "shapez"\n\n[[reward]]\nname = "shapes"\nreplica = 2\n')
    assert main(["serve-reward", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "@ $.server.port" in err and "@ $.reward[0].name" in err and "did you mean 'shapes'" in err
    assert "unknown key 'replica' (did you mean 'replicas'?) @ $.reward[1]" in err


def test_a_vlm_judge_key_stays_out_of_the_resolved_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = "sk-integration-secret-42"
    monkeypatch.setenv("JUDGE_KEY", key)
    options = '{base_url = "http://127.0.0.1:9/v1", model = "judge", api_key_env = "JUDGE_KEY"}'
    config = load_config(QUICKSTART, ['reward.0.name="vlm_judge"', f"reward.0.options={options}"])
    Trainer(config)  # builds the reward: the key is read, and kept nowhere
    resolved, _ = write_resolved(config, tmp_path)
    text = resolved.read_text()
    assert 'api_key_env = "JUDGE_KEY"' in text and key not in text
