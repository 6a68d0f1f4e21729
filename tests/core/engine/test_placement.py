"""The device boundary (omni_rl.engine.placement) and the CPU guard that stands in for a second device."""

from __future__ import annotations

import attrs
import pytest
import torch

from omni_rl.batch import Conditioning, RolloutBatch, Trajectory
from omni_rl.engine import placement, placement_guard
from omni_rl.engine.placement_guard import PlacementError, PlacementGuard


@pytest.fixture
def guard_on(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(placement_guard.ENV, "1")
    with PlacementGuard():
        yield


def _batch(n: int = 4, w: int = 2) -> RolloutBatch:
    traj = Trajectory(
        latents=torch.randn(n, w, 3, 2, 2),
        next_latents=torch.randn(n, w, 3, 2, 2),
        sigmas=torch.rand(n, w),
        next_sigmas=torch.rand(n, w),
        log_probs=torch.randn(n, w),
        sigma_max=torch.ones(n),
        step_indices=torch.zeros(n, w, dtype=torch.long),
        guidance_scale=4.5,
    )
    return RolloutBatch(
        prompts=["p"] * n,
        group_ids=torch.zeros(n, dtype=torch.long),
        seeds=torch.arange(n),
        images=torch.zeros(n, 4, 4, 3, dtype=torch.uint8),
        final_latents=torch.randn(n, 3, 2, 2),
        conditioning=Conditioning({"embeds": torch.randn(n, 5, 8)}),
        trajectory=traj,
        metadata=[{}] * n,
    )


def test_move_reaches_every_tensor_of_a_record() -> None:
    batch = _batch()
    moved = placement.move(batch, "meta")
    tensors = [moved.images, moved.final_latents, moved.conditioning.tensors["embeds"], moved.group_ids]
    tensors += [getattr(moved.trajectory, f.name) for f in attrs.fields(Trajectory) if f.name != "guidance_scale"]
    assert all(t.device.type == "meta" for t in tensors)
    assert moved.trajectory.guidance_scale == 4.5 and moved.prompts == batch.prompts
    assert batch.images.device.type == "cpu"  # the source record is untouched


def test_to_host_of_a_host_record_copies_nothing() -> None:
    batch = _batch()
    assert placement.to_host(batch).final_latents is batch.final_latents


def test_guard_refuses_the_issue_28_mix(guard_on: None) -> None:
    """The rollout's log-probs left on the host minus log-probs recomputed on the device: what failed at step 1
    on the first GPU run."""
    host = placement.to_host(_batch())
    weight = torch.nn.Parameter(torch.randn(2, 2))
    placement_guard.mark(weight, placement_guard.DEVICE)
    recomputed = (weight.sum() * torch.ones(4, 2, device="cpu")).detach()
    with pytest.raises(PlacementError, match="mixes host and device"):
        _ = recomputed - host.trajectory.log_probs
    # through the boundary it is fine, and so are CPU scalars and host index tensors
    on_device = placement.to_device(host, "cpu")
    _ = recomputed - on_device.trajectory.log_probs
    _ = recomputed * torch.tensor(2.0)
    _ = recomputed[torch.tensor([0, 1])]


def test_guard_tracks_moves_and_factories(guard_on: None) -> None:
    host = torch.randn(3)  # a factory without device=: the host, as on a GPU worker
    device = torch.zeros(3, device="cpu")
    assert placement_guard.place_of(host) == "host" and placement_guard.place_of(device) == "device"
    moved = host.to("cpu")
    assert placement_guard.place_of(moved) == "device" and placement_guard.place_of(host) == "host"
    assert placement_guard.place_of(moved.cpu()) == "host"
    assert placement_guard.place_of(device * 2 + 1) == "device"
    with pytest.raises(PlacementError):
        torch.cat([host, device])
    buffer = torch.empty(3)  # copies across places are what CUDA allows
    buffer.copy_(device)
    buffer[:2] = device[:2]


def test_guard_is_off_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(placement_guard.ENV, raising=False)
    with placement_guard.guarded():
        assert not placement_guard._active()
