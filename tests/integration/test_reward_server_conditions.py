"""Condition images through a real ``omni-rl serve-reward`` (issue 49): ``image_similarity`` on a tiny random CLIP
behind Ray Serve says ``"reads_conditions": true`` on GET, and the ``http`` reward with ``send_conditions`` gets
exactly the in-process reward's scores for each sample's own sources (merged requests included); a served reward
that does not read them refuses them with a 400 naming the option. Needs omni-rl-rewards-clip (skipped without)."""

from __future__ import annotations

import importlib.util
import json
import socket
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from omni_rl import get_registry
from omni_rl.config import structure_options
from omni_rl.config.schema import ResolvedComponent
from omni_rl.errors import RuntimeFailure
from omni_rl.rewards.combined import CombinedReward
from omni_rl.serving import load_serve_config
from omni_rl.serving.launch import start_servers

CLIP_TINY = Path(__file__).parents[2] / "plugins" / "omni-rl-rewards-clip" / "tests" / "clip_tiny_models.py"


def _tiny_clip(directory: Path) -> Path:
    spec = importlib.util.spec_from_file_location("clip_tiny_models", CLIP_TINY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.save_tiny_clip(directory)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _section(name: str, options: dict) -> ResolvedComponent:
    found = get_registry().find("reward", name)
    assert found is not None
    return ResolvedComponent(kind="reward", name=name, spec=found.spec, options=structure_options(found.spec, options))


def test_a_served_edit_reward_gets_each_samples_sources(ray_cluster: None, tmp_path: Path) -> None:
    if get_registry().find("reward", "image_similarity") is None or not CLIP_TINY.is_file():
        pytest.skip("omni-rl-rewards-clip is not installed")
    from ray import serve

    clip = _tiny_clip(tmp_path / "clip")
    port = _free_port()
    serve_config = tmp_path / "serve.toml"
    serve_config.write_text(
        f'[server]\nport = {port}\n\n[[reward]]\nname = "image_similarity"\nroute = "similarity"\n'
        "resources = { CPU = 0.5 }\nmax_batch_size = 4\nbatch_wait_timeout_s = 0.2\n"
        f'options = {{ model = "{clip}" }}\n'
        '\n[[reward]]\nname = "shapes"\nresources = { CPU = 0.25 }\n'
    )
    config = load_serve_config(serve_config, [], get_registry())
    rng = np.random.default_rng(3)
    results = rng.integers(0, 256, size=(6, 32, 32, 3), dtype=np.uint8)
    sources = [rng.integers(0, 256, size=(40, 28, 3), dtype=np.uint8) for _ in range(3)]
    conditions = [(sources[i // 2],) for i in range(6)]  # three groups of two sharing their source
    conditions[5] = (results[5].copy(),)  # an unedited output scores 1
    prompts = ["make it blue"] * 6
    try:
        url, shapes_url = start_servers(config)
        described = json.loads(urllib.request.urlopen(url, timeout=30).read())
        assert described == {
            "protocol": "omni-rl-reward/1",
            "reward": "image_similarity",
            "scores_video": False,
            "reads_conditions": True,
        }
        local = CombinedReward([_section("image_similarity", {"model": str(clip)})], None)
        expected = local(results, prompts, [{}] * 6, conditions=conditions).total
        assert expected[5] == pytest.approx(1.0, abs=1e-5) and np.ptp(expected) > 1e-3
        for encoding, batch_size in (("png", 0), ("raw", 2)):
            options = {"url": url, "send_conditions": True, "image_encoding": encoding, "batch_size": batch_size}
            remote = CombinedReward([_section("http", options)], None)
            np.testing.assert_allclose(
                remote(results, prompts, [{}] * 6, conditions=conditions).total, expected, atol=1e-6
            )
        # requests within the batch window are merged into one call of the reward: each keeps its own sources
        one = CombinedReward([_section("http", {"url": url, "send_conditions": True})], None)
        with ThreadPoolExecutor(3) as pool:
            parts = list(
                pool.map(
                    lambda k: (
                        one(
                            results[2 * k : 2 * k + 2], prompts[:2], [{}] * 2, conditions=conditions[2 * k : 2 * k + 2]
                        ).total
                    ),
                    range(3),
                )
            )
        np.testing.assert_allclose(np.concatenate(parts), expected, atol=1e-6)
        # without send_conditions the served reward gets none and says what to do (a 422, not retried)
        bare = CombinedReward([_section("http", {"url": url, "max_retries": 0})], None)
        with pytest.raises(RuntimeFailure, match=r"HTTP 422.*sample 0 has none.*options\.send_conditions = true"):
            bare(results, prompts, [{}] * 6, conditions=conditions)
        # a served reward that does not read them: a 400 naming the option
        shapes = CombinedReward(
            [_section("http", {"url": shapes_url, "send_conditions": True, "max_retries": 0})], None
        )
        with pytest.raises(RuntimeFailure, match=r"HTTP 400.*reads_conditions.*: false.*send_conditions = false\)"):
            shapes(results, ["a red circle"] * 6, [{}] * 6, conditions=conditions)
    finally:
        serve.shutdown()
