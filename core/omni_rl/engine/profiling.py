"""``[log] profile_steps``: a torch.profiler trace of chosen training steps, written where the run writes.

A step's time goes to a handful of places (transformer calls, the VAE decode, the sampler, the backward, host
copies, waiting on Ray), and which one dominates depends on the model, the GPU and the batch sizes; the
``perf/*`` metrics split a step only into rollout / reward / train. The trace shows every operator and CUDA
kernel on a timeline. It is taken inside the policy worker, where the compute runs: it starts when the worker
begins the step's training rollout and stops when its update returns, so it covers sampling, the VAE decode, the
old log-prob recompute, the update and the optimizer step (the driver's reward scoring happens in between and
shows as a gap). The file is Chrome trace JSON (``export_chrome_trace``), which https://ui.perfetto.dev and
chrome://tracing open: ``<output_dir>/profile/step_<N>.<worker>.json``, ``<worker>`` being ``rank<r>``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

_log = logging.getLogger(__name__)

PROFILE_DIR = "profile"


def trace_path(run_dir: Path, step: int, worker: str) -> Path:
    """Where step ``step``'s trace of ``worker`` goes."""
    return Path(run_dir) / PROFILE_DIR / f"step_{step}.{worker}.json"


class StepProfiler:
    """Starts a profiler at :meth:`start` of a listed step and writes its trace at :meth:`stop` of that step."""

    def __init__(self, steps: Iterable[int], run_dir: Path, worker: str) -> None:
        self.steps = frozenset(int(s) for s in steps)
        self.run_dir = Path(run_dir)
        self.worker = worker
        self._active: tuple[int, Any] | None = None

    def start(self, step: int) -> None:
        """Begin tracing when ``step`` is listed (a trace still open from an earlier step is closed first)."""
        if step not in self.steps:
            return
        if self._active is not None:
            self.stop(self._active[0])
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(ProfilerActivity.CUDA)
        profiler = profile(activities=activities, record_shapes=True, with_stack=False)
        profiler.__enter__()
        self._active = (step, profiler)

    def stop(self, step: int) -> Path | None:
        """End step ``step``'s trace and write it; None when it was not being traced."""
        if self._active is None or self._active[0] != step:
            return None
        _, profiler = self._active
        self._active = None
        profiler.__exit__(None, None, None)
        path = trace_path(self.run_dir, step, self.worker)
        path.parent.mkdir(parents=True, exist_ok=True)
        profiler.export_chrome_trace(str(path))
        _log.warning("profile of step %d written to %s", step, path)
        return path
