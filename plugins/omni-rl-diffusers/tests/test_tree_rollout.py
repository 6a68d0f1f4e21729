"""Tree rollouts in the diffusers backend (docs/math.md#tree-rollouts): leaves share their ancestors' latents bit for
bit, siblings differ after their branch step, the transformer runs once per distinct node, and the trajectory
re-scores to its log-probs. The tiny random sd3 pipeline with ``flow_sde`` branching [2, 2] on steps 1 and 2 of 4."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omni_rl_diffusers.tree import leaf_positions, node_keys, unique_rows
from test_diffusers_backend import SpyModel, _build, _request, _rollout

from omni_rl.errors import ConfigError
from omni_rl.protocols import DiffusionModel, Sampler

PROMPTS = ["a red square"] * 4 + ["a blue circle"] * 4


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> DiffusionModel:
    sd3_tiny = pytest.importorskip("omni_rl_sd3.tiny")
    path: Path = sd3_tiny.build_tiny_sd3_pipeline(tmp_path_factory.mktemp("sd3") / "tiny", seed=0)
    return _build("omni_rl_sd3.hooks", "omni_rl_models", "sd3", {"path": str(path), "lora_rank": 4})


@pytest.fixture(scope="module")
def tree_sampler() -> Sampler:
    options = {"noise_level": 0.7, "window_size": 2, "window_range": [1, 3], "window_mode": "fixed"}
    return _build("omni_rl_flow_grpo.hooks", "omni_rl_samplers", "flow_sde", {**options, "tree_branching": [2, 2]})


def test_the_node_bookkeeping_by_hand() -> None:
    assert leaf_positions([5, 5, 9, 5, 9]) == [0, 1, 0, 2, 1]
    groups, positions = [0] * 4, [0, 1, 2, 3]
    assert node_keys(groups, positions, [2, 2], 0) == [(0, -1)] * 4
    assert node_keys(groups, positions, [2, 2], 1) == [(0, 0), (0, 0), (0, 1), (0, 1)]
    assert node_keys(groups, positions, [2, 2], 2) == [(0, 0), (0, 1), (0, 2), (0, 3)]
    rows, inverse = unique_rows([(0, 0), (0, 0), (0, 1), (1, 0)])
    assert rows == [0, 2, 3] and inverse.tolist() == [0, 0, 1, 2]


def test_a_tree_shares_prefixes_and_runs_the_transformer_once_per_node(
    tiny_model: DiffusionModel, tree_sampler: Sampler
) -> None:
    spy = SpyModel(tiny_model)
    rollout = _rollout(group_size=4, batch_size=8, steps=4)
    batch = rollout.generate(spy, tree_sampler, _request(PROMPTS, list(range(8))))
    traj = batch.trajectory
    assert traj is not None and traj.log_probs.shape == (8, 2)
    # rows per transformer call: step 0 and step 1 see the 2 roots, step 2 the 4 level-1 nodes, step 3 the 8 leaves
    assert [x.shape[0] for x, _, _ in spy.velocity_inputs] == [2, 2, 4, 8]
    x1 = traj.latents[:, 0]  # the state entering branch step 0: the group's root after one ODE step
    assert torch.equal(x1[0], x1[3]) and torch.equal(x1[4], x1[7]) and not torch.equal(x1[0], x1[4])
    after0 = traj.next_latents[:, 0]  # level-1 nodes: leaves {0, 1} and {2, 3} of each group
    assert torch.equal(after0[0], after0[1]) and torch.equal(after0[2], after0[3])
    assert not torch.equal(after0[0], after0[2])
    assert torch.equal(traj.log_probs[0, 0], traj.log_probs[1, 0])
    after1 = traj.next_latents[:, 1]  # the leaves: all differ
    assert len({tuple(row.flatten().tolist()[:4]) for row in after1[:4]}) == 4
    # the recorded log-probs re-score: the sampler's log-prob of the stored step equals the rollout's
    sigma, sigma_next = traj.sigmas[:, 1], traj.next_sigmas[:, 1]
    velocity = tiny_model.predict_velocity(traj.latents[:, 1], sigma, batch.conditioning, traj.guidance_scale)
    step = tree_sampler.step(
        traj.latents[:, 1], velocity, sigma, sigma_next, sigma_max=traj.sigma_max, prev_sample=traj.next_latents[:, 1]
    )
    assert torch.allclose(step.log_prob, traj.log_probs[:, 1], atol=1e-4)


def test_a_tree_is_the_same_whatever_the_chunking(tiny_model: DiffusionModel, tree_sampler: Sampler) -> None:
    request = _request(PROMPTS, list(range(8)))
    whole = _rollout(group_size=4, batch_size=8, steps=4).generate(tiny_model, tree_sampler, request)
    halves = _rollout(group_size=4, batch_size=4, steps=4).generate(tiny_model, tree_sampler, request)
    assert torch.allclose(whole.final_latents, halves.final_latents, atol=1e-5)


def test_a_group_that_is_not_the_trees_leaves_is_refused(tiny_model: DiffusionModel, tree_sampler: Sampler) -> None:
    with pytest.raises(ConfigError, match="group_size = 4"):
        _rollout(group_size=2, steps=4).generate(tiny_model, tree_sampler, _request(["a", "a", "b", "b"], [0, 1, 2, 3]))
