"""The GPU suite (``pytest -m gpu``, ``nox -s gpu``): every example and runtime path through ``omni-rl run`` on
CUDA. Where no CUDA device is visible every test is skipped with one line saying so; the default CPU run
deselects them by their ``gpu`` mark."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

NO_CUDA = "no CUDA device visible: the GPU suite runs on a machine with one (nox -s gpu)"


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    rehearsal = os.environ.get("OMNI_RL_GPU_SUITE_ON_CPU") == "1"  # gpu_checks.rehearsal
    skip = None if (_cuda() or rehearsal) else pytest.mark.skip(reason=NO_CUDA)
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.gpu)
            if skip is not None:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def gpu_ray():
    """One embedded Ray per test process, holding the machine's GPU (runs share it with fractional requests)."""
    import ray

    gpus = 0 if os.environ.get("OMNI_RL_GPU_SUITE_ON_CPU") == "1" else 1
    ray.init(address="local", num_cpus=8, num_gpus=gpus, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny random SD3, Qwen-Image, FLUX and Wan pipelines the tiny examples train, built once per process."""
    from omni_rl_flux.tiny import build_tiny_flux_pipeline
    from omni_rl_qwen_image.tiny import build_tiny_qwen_image_pipeline
    from omni_rl_sd3.tiny import build_tiny_sd3_pipeline
    from omni_rl_wan.tiny import build_tiny_wan_pipeline

    root = tmp_path_factory.mktemp("models")
    return {
        "sd3": Path(build_tiny_sd3_pipeline(root / "sd3", seed=0)),
        "qwen_image": Path(build_tiny_qwen_image_pipeline(root / "qwen_image", seed=0)),
        "flux": Path(build_tiny_flux_pipeline(root / "flux", seed=0)),
        "wan": Path(build_tiny_wan_pipeline(root / "wan", seed=0)),
    }
