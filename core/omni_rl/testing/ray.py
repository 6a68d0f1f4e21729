"""An embedded Ray for tests that run whole trainings: started once, or reused when the session already runs one.

A Ray start costs seconds and ~2 GB, so a module's runs share one, and in a whole-repo test session (where
``tests/integration`` starts one for the session) they reuse that one instead of starting a second."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def local_ray(num_cpus: int = 2) -> Iterator[None]:
    """A local Ray of ``num_cpus`` CPUs for the body, shut down after; a running one is reused and left running.

    In a fixture: ``with local_ray(): yield``."""
    import ray

    if ray.is_initialized():
        yield
        return
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
