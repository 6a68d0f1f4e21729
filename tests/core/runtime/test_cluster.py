"""The fail-fast resource check of a run (``runtime.cluster``) against made-up clusters, without starting Ray:
totals cover the workers and the reward actors together, and every worker and reward actor fits one node."""

from __future__ import annotations

import re

import attrs
import pytest

from omni_rl.config.schema import ClusterConfig
from omni_rl.errors import RuntimeFailure
from omni_rl.rewards.combined import actor_resources
from omni_rl.runtime import cluster as cluster_mod


@pytest.fixture
def fake_cluster(monkeypatch: pytest.MonkeyPatch):
    """``fake(*nodes)``: Ray reports these nodes (resource dicts) and their sum."""
    import ray

    def fake(*nodes: dict[str, float]) -> None:
        total: dict[str, float] = {}
        for node in nodes:
            for key, value in node.items():
                total[key] = total.get(key, 0.0) + value
        monkeypatch.setattr(ray, "cluster_resources", lambda: dict(total))
        monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": dict(n)} for n in nodes])

    return fake


def test_enough_resources_pass(fake_cluster) -> None:
    fake_cluster({"CPU": 8, "GPU": 4}, {"CPU": 8, "GPU": 4})
    cluster_mod._check_resources(ClusterConfig(workers=8, gpus_per_worker=1, cpus_per_worker=1))


def test_missing_gpus_are_named_with_need_and_have(fake_cluster) -> None:
    fake_cluster({"CPU": 16, "GPU": 4})
    with pytest.raises(RuntimeFailure, match=r"GPU: need 8 \(8 worker\(s\) x 1\), cluster has 4"):
        cluster_mod._check_resources(ClusterConfig(workers=8, gpus_per_worker=1))


def test_a_worker_larger_than_every_node_fails_though_the_totals_suffice(fake_cluster) -> None:
    fake_cluster({"CPU": 8, "GPU": 4}, {"CPU": 8, "GPU": 4})
    with pytest.raises(RuntimeFailure) as excinfo:
        cluster_mod._check_resources(ClusterConfig(workers=1, gpus_per_worker=8, cpus_per_worker=1))
    message = str(excinfo.value)
    assert "each of the 1 worker(s) needs 1 CPU, 8 GPU on one node" in message
    assert "the largest has 8 CPU, 4 GPU" in message
    assert "GPU: need" not in message  # the totals (8 of 8) are enough


def test_reward_actors_count_in_the_totals(fake_cluster) -> None:
    fake_cluster({"CPU": 4, "GPU": 2})
    rewards = [actor_resources({"GPU": 1}), actor_resources({"GPU": 0.5, "CPU": 2})]
    assert rewards == [{"CPU": 1.0, "GPU": 1.0}, {"CPU": 2.0, "GPU": 0.5}]
    config = ClusterConfig(workers=1, gpus_per_worker=1, cpus_per_worker=1)
    expected = "GPU: need 2.5 (1 worker(s) x 1 + reward actors 1.5), cluster has 2"
    with pytest.raises(RuntimeFailure, match=re.escape(expected)):
        cluster_mod._check_resources(config, rewards)
    cluster_mod._check_resources(config, rewards[:1])  # 2 GPUs: exactly enough


def test_rollout_workers_count_in_the_totals_with_their_own_bundle(fake_cluster) -> None:
    fake_cluster({"CPU": 8, "GPU": 2})
    config = ClusterConfig(workers=1, gpus_per_worker=1, rollout_workers=2, rollout_gpus_per_worker=0.75)
    expected = "GPU: need 2.5 (1 worker(s) x 1 + 2 rollout worker(s) x 0.75), cluster has 2"
    with pytest.raises(RuntimeFailure, match=re.escape(expected)):
        cluster_mod._check_resources(config)
    cluster_mod._check_resources(attrs.evolve(config, rollout_gpus_per_worker=0.5))  # 2 GPUs: exactly enough


def test_a_custom_resource_no_node_has_is_named(fake_cluster) -> None:
    fake_cluster({"CPU": 4})
    with pytest.raises(RuntimeFailure, match=r"ocr_box: need 1 .*cluster has 0") as excinfo:
        cluster_mod._check_resources(ClusterConfig(), [actor_resources({"ocr_box": 1})])
    assert "reward actor 1 needs 1 CPU, 1 ocr_box on one node" in str(excinfo.value)
