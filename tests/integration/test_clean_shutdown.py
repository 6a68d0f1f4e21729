"""A run that fails leaves nothing behind on the Ray cluster: its policy workers, its reward actors and its
placement group are all gone once ``omni-rl run`` returns (the cluster's resources are free for the next run).

The check reads Ray's GCS tables (actors, placement groups). ``ray.util.state`` would say the same, but it asks the
dashboard's API server, which the test suite's Ray runs without (``include_dashboard=False``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from omni_rl.cli import main

EXAMPLES = Path(__file__).parents[2] / "docs" / "examples"


def _actors() -> dict[str, dict]:
    from ray._private.state import actors

    return actors()


def _alive(started: dict[str, dict]) -> dict[str, str]:
    """Those of ``started`` not dead yet (alive, pending or restarting: all hold or want resources)."""
    now = _actors()
    return {aid: now[aid]["State"] for aid in started if now[aid]["State"] != "DEAD"}


def _live_placement_groups() -> set[str]:
    import ray

    return {pid for pid, info in ray.util.placement_group_table().items() if info["state"] != "REMOVED"}


def test_a_failed_run_leaves_no_actor_or_placement_group(
    tmp_path: Path, tiny_sd3: Path, ray_cluster: None, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from omni_rl_rewards.jpeg import JpegSizeReward

    # two rewards: one in its own Ray actor (it scores), one in the driver that raises on the first batch
    config = tmp_path / "config.toml"
    config.write_text(
        (EXAMPLES / "sd3_tiny_jpeg.toml").read_text()
        + '\n[[reward]]\nname = "jpeg_incompressibility"\nweight = 0.5\nresources = { CPU = 0.25 }\n'
    )

    def broken(self, images, prompts, metadata):
        raise ValueError("scorer crashed")

    monkeypatch.setattr(JpegSizeReward, "__call__", broken)  # in this process only: the actor's copy still works
    before_actors, before_groups = set(_actors()), _live_placement_groups()
    sets = [
        f"run.output_dir={tmp_path / 'run'}",
        f"model.options.path={tiny_sd3}",
        f"data.train={EXAMPLES / 'prompts' / 'objects.txt'}",
        "run.steps=1",
        "rollout.options.height=32",
        "rollout.options.width=32",
        "rollout.options.group_size=2",
        "data.prompts_per_step=2",
        "cluster.workers=2",
        "cluster.cpus_per_worker=0.5",
        "log.image_every=0",
    ]
    code = main(["run", str(config), *[a for s in sets for a in ("--set", s)]])
    text = "".join(capsys.readouterr())
    assert code == 1, text
    assert "reward 'jpeg_compressibility' failed: ValueError: scorer crashed" in text
    # the run did start its workers and its reward actor (so their removal below is a real check) ...
    started = {aid: info for aid, info in _actors().items() if aid not in before_actors}
    names = sorted(info["ActorClassName"] for info in started.values())
    assert names == ["PolicyWorker", "PolicyWorker", "RewardActor"], names
    # ... and none of them, nor the placement group, outlives it (ray.kill is asynchronous: allow a few seconds)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (_alive(started) or _live_placement_groups() - before_groups):
        time.sleep(0.2)
    assert _alive(started) == {}
    assert _live_placement_groups() - before_groups == set()
