"""The ``geneval`` reward on ``omni-rl serve-reward``: each prompt's GenEval metadata crosses the reward protocol and
the scores and every detail (NaN for the tags an image does not have, sent as null) equal the in-process reward's
on the tiny models. Fast: the replica's own request handling (decode, merge two requests into one call, encode)
without Ray; slow: the real server (Ray Serve, the serve config a user writes) through the ``http`` reward."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omni_rl_geneval.hooks import omni_rl_reward_models
from omni_rl_geneval.metadata import evaluation_prompts

import omni_rl
from omni_rl.config import structure_options
from omni_rl.context import BuildContext

PICK = [0, 100, 200, 300, 400, 500]  # one prompt of each tag


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _serve_toml(port: int, options: dict[str, Any]) -> str:
    inline = ", ".join(f"{key} = {json.dumps(value)}" for key, value in options.items())
    return (
        f"[server]\nport = {port}\n\n"
        '[[reward]]\nname = "geneval"\nreplicas = 1\nresources = { CPU = 1 }\nmax_batch_size = 8\n'
        f"options = {{ {inline} }}\n"
    )


def _records() -> tuple[np.ndarray, list[str], list[dict[str, Any]]]:
    records = [evaluation_prompts()[i] for i in PICK]
    images = np.random.default_rng(0).integers(0, 256, size=(len(records), 48, 48, 3), dtype=np.uint8)
    return images, [r.prompt for r in records], [r.metadata for r in records]


def _local(options: dict[str, Any]) -> Any:
    (spec,) = omni_rl_reward_models()
    return spec.factory(structure_options(spec, options), BuildContext())


def _assert_same(served: Any, local: Any) -> None:
    np.testing.assert_allclose(served.scores, local.scores, rtol=1e-6)
    assert served.details.keys() == local.details.keys()
    for key, values in local.details.items():
        np.testing.assert_allclose(served.details[key], values, rtol=1e-6, equal_nan=True, err_msg=key)
    assert np.isnan(served.details["counting"]).sum() == len(PICK) - 1  # one counting prompt: NaN crossed as null


def test_the_replicas_request_handling_keeps_metadata_and_nan_details(tiny_options: dict[str, Any]) -> None:
    pytest.importorskip("ray.serve")
    from omni_rl.rewards.protocol import decode_request, decode_response, encode_request, encode_response
    from omni_rl.serving.replica import Job, score_jobs

    images, prompts, metadata = _records()
    reward = _local(tiny_options)
    jobs = []
    for part in (slice(0, 2), slice(2, None)):  # two clients' requests, merged into one reward call
        body = json.loads(json.dumps(encode_request(images[part], prompts[part], metadata[part], "png")))
        jobs.append(Job(*decode_request(body)))
    answers = [json.loads(json.dumps(encode_response(result))) for result in score_jobs(reward, jobs)]
    parts = [decode_response(answer, len(job.prompts)) for answer, job in zip(answers, jobs, strict=True)]
    served = type(parts[0])(
        scores=np.concatenate([p.scores for p in parts]),
        details={k: np.concatenate([p.details[k] for p in parts]) for k in parts[0].details},
    )
    _assert_same(served, reward(images, prompts, metadata))


@pytest.mark.slow  # ~1 min on 2 CPU cores: Ray and Serve start, torch and transformers load in the replica
def test_geneval_served_scores_like_in_process(tiny_options: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("ray.serve")
    from omni_rl import get_registry
    from omni_rl.serving import load_serve_config
    from omni_rl.serving.launch import start_servers
    from omni_rl.testing.ray import local_ray

    registry = get_registry()
    if registry.find("reward", "http") is None:
        pytest.skip("the http reward (omni-rl-rewards-remote) is not installed")
    images, prompts, metadata = _records()

    path = tmp_path / "serve.toml"
    path.write_text(_serve_toml(_free_port(), tiny_options), encoding="utf-8")
    config = load_serve_config(path, [], registry)
    with local_ray(num_cpus=2):
        from ray import serve

        try:
            (url,) = start_servers(config)
            http = omni_rl.build("reward", "http", {"url": url}, BuildContext())
            served = http(images, prompts, metadata)
        finally:
            serve.shutdown()

    _assert_same(served, _local(tiny_options)(images, prompts, metadata))
