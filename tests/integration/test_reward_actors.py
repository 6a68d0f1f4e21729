"""A [[reward]] with `resources` scores in its own Ray actor and gives the same numbers as in the driver."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from omni_rl import load_config
from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import RolloutOutcome
from omni_rl.rewards.combined import CombinedReward

EXAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"


def test_reward_with_resources_runs_in_an_actor(ray_cluster: None) -> None:
    import ray

    local = load_config(EXAMPLE).rewards
    remote = load_config(EXAMPLE, ["reward.0.resources={CPU = 1}"]).rewards
    assert remote[0].resources == {"CPU": 1.0}
    images = np.random.default_rng(0).integers(0, 256, size=(3, 32, 32, 3), dtype=np.uint8)
    prompts = ["a", "b", "c"]
    expected = CombinedReward(local, None)(images, prompts, [{}] * 3)
    combined = CombinedReward(remote, None)
    got = combined(images, prompts, [{}] * 3)
    assert isinstance(combined.models[0], ray.actor.ActorHandle)
    np.testing.assert_array_equal(got.total, expected.total)
    assert (
        got.metrics()["reward/jpeg_compressibility/size_kb"]
        == expected.metrics()["reward/jpeg_compressibility/size_kb"]
    )


def test_a_failing_reward_names_itself(ray_cluster: None) -> None:
    rewards = CombinedReward(load_config(EXAMPLE).rewards, None)
    with pytest.raises(RuntimeFailure, match="reward 'jpeg_compressibility' failed"):
        rewards(np.zeros((2, 8, 8), dtype=np.uint8), ["a", "b"], [{}] * 2)
    zero = CombinedReward(load_config(EXAMPLE, ['reward.0.on_error="zero"']).rewards, None)
    scored = zero(np.zeros((2, 8, 8), dtype=np.uint8), ["a", "b"], [{}] * 2)
    assert scored.total.tolist() == [0.0, 0.0]
    assert scored.metrics()["reward/jpeg_compressibility/failures"] == 1.0


def _outcome(images: np.ndarray, prompts: list[str]) -> RolloutOutcome:
    """One worker's rollout outcome, as a sampling worker hands it to the reward actors."""
    return RolloutOutcome(images=images, prompts=prompts, group_ids=np.arange(len(prompts)))


def test_streamed_parts_join_to_the_whole_batch_score(ray_cluster: None) -> None:
    """[run] stream_rewards: scoring each worker's part as it is sampled gives the whole batch's scores, details
    and order; a failed part (on_error = "zero") scores only its own samples 0 and counts one failure."""
    import ray

    remote = load_config(EXAMPLE, ["reward.0.resources={CPU = 0.5}", 'reward.0.on_error="zero"']).rewards
    images = np.random.default_rng(1).integers(0, 256, size=(5, 32, 32, 3), dtype=np.uint8)
    prompts = ["a", "b", "c", "d", "e"]
    combined = CombinedReward(remote, None)
    try:
        whole = combined(images, prompts, [{}] * 5)
        first, second = [0, 1], [2, 3, 4]
        second_ref = ray.put(_outcome(images[2:], prompts[2:]))
        parts = [(first, ray.put(_outcome(images[:2], prompts[:2]))), (second, second_ref)]
        got = combined(images, prompts, [{}] * 5, combined.submit_parts(parts, [{}] * 5))
        np.testing.assert_array_equal(got.total, whole.total)
        assert got.metrics() == whole.metrics()
        broken = [(first, ray.put(_outcome(np.zeros((2, 8, 8), np.uint8), prompts[:2]))), parts[1]]
        partial = combined(images, prompts, [{}] * 5, combined.submit_parts(broken, []))
        assert partial.total[:2].tolist() == [0.0, 0.0]
        np.testing.assert_array_equal(partial.total[2:], whole.total[2:])
        assert partial.failures == {"jpeg_compressibility": 1}
    finally:
        combined.close()
