"""Fixtures for end-to-end tests: every first-party plugin installed, one tiny SD3 pipeline, one Ray."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tiny_sd3(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random StableDiffusion3Pipeline directory, written once per session."""
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline

    return Path(build_tiny_sd3_pipeline(tmp_path_factory.mktemp("sd3") / "tiny", seed=0))


@pytest.fixture(scope="session")
def tiny_qwen_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random QwenImagePipeline directory, written once per session."""
    from omni_rl_qwen_image.tiny import build_tiny_qwen_image_pipeline

    return Path(build_tiny_qwen_image_pipeline(tmp_path_factory.mktemp("qwen-image") / "tiny", seed=0))


@pytest.fixture(scope="session")
def tiny_qwen_image21(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random QwenImage21Pipeline directory, written once per session."""
    from omni_rl_qwen_image.qwen21_tiny import build_tiny_qwen_image21_pipeline

    return Path(build_tiny_qwen_image21_pipeline(tmp_path_factory.mktemp("qwen-image21") / "tiny", seed=0))


@pytest.fixture(scope="session")
def tiny_flux2_klein(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Flux2KleinPipeline directory (the base variant: CFG), written once per session."""
    from omni_rl_flux2.tiny import build_tiny_flux2_klein_pipeline

    return Path(build_tiny_flux2_klein_pipeline(tmp_path_factory.mktemp("flux2-klein") / "tiny", seed=0))


@pytest.fixture(scope="session")
def tiny_z_image(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random ZImagePipeline directory (the base variant), written once per session."""
    from omni_rl_z_image.tiny import build_tiny_z_image_pipeline

    return Path(build_tiny_z_image_pipeline(tmp_path_factory.mktemp("z-image") / "tiny", seed=0))


@pytest.fixture(scope="session")
def tiny_flux(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random FluxPipeline directory (FLUX.1-dev's layout: guidance embeddings), written once per session."""
    from omni_rl_flux.tiny import build_tiny_flux_pipeline

    return Path(build_tiny_flux_pipeline(tmp_path_factory.mktemp("flux") / "tiny", seed=0))


@pytest.fixture(scope="session")
def ray_cluster():
    """One embedded Ray for the whole session: a Ray start costs seconds and ~2 GB. Runs reuse it."""
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


#: the sd3_tiny_jpeg example shrunk to two steps of 2 prompts x 4 images at 32 px, a checkpoint every step
SMALL_JPEG_SETS = (
    "run.steps=2",
    "run.save_every=1",
    "rollout.options.height=32",
    "rollout.options.width=32",
    "rollout.options.group_size=4",
    "rollout.options.batch_size=4",
    "data.prompts_per_step=2",
    "optim.micro_batch=2",
    "optim.mini_batch=4",
    "cluster.cpus_per_worker=1",
    "log.image_every=0",
)


@pytest.fixture(scope="session")
def small_jpeg_args(tiny_sd3: Path):
    """``args(out, *extra_sets) -> argv`` of ``omni-rl run`` for the small sd3_tiny_jpeg run writing to ``out``,
    with more ``--set`` overrides after the shared ones (later ones win)."""
    example = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"

    def args(out: Path, *extra: str) -> list[str]:
        sets = [f"run.output_dir={out}", f"model.options.path={tiny_sd3}", *SMALL_JPEG_SETS, *extra]
        return ["run", str(example), *[a for s in sets for a in ("--set", s)]]

    return args


@pytest.fixture(name="parts_submitted")
def parts_submitted_fixture(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many parts of each training batch the driver handed to the reward actors while it sampled
    (``[run] stream_rewards``), one entry per batch."""
    from omni_rl.rewards.combined import CombinedReward

    seen: list[int] = []
    submit = CombinedReward.submit_parts

    def spy(self: CombinedReward, parts: Any, metadata: Any, conditions: Any = None) -> Any:
        seen.append(len(parts))
        return submit(self, parts, metadata, conditions)

    monkeypatch.setattr(CombinedReward, "submit_parts", spy)
    return seen


@pytest.fixture
def small_jpeg_run(tiny_sd3: Path, ray_cluster: None):
    """``run(out, workers, *extra_sets) -> metrics rows``: the small sd3_tiny_jpeg run the worker-count tests
    compare (1 vs 2 workers, DDP vs FSDP2), on the session's tiny pipeline and Ray."""
    from omni_rl.cli import main

    example = Path(__file__).parents[2] / "docs" / "examples" / "sd3_tiny_jpeg.toml"

    def run(out: Path, workers: int, *extra: str) -> list[dict]:
        sets = [f"run.output_dir={out}", f"model.options.path={tiny_sd3}", *SMALL_JPEG_SETS]
        sets += [f"cluster.workers={workers}", *extra]
        assert main(["run", str(example), *[a for s in sets for a in ("--set", s)]]) == 0
        return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]

    return run
