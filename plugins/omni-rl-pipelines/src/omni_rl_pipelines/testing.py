"""Test helpers for the model plugins built on :class:`omni_rl_pipelines.pipeline_model.PipelineModel` (SD3, FLUX,
Qwen-Image, Wan): the conformance checks of full fine-tuning, written once for all of them, a CPU stand-in for CUDA
graphs and the first update's on-policy ratio. Imports pytest; only tests import this module."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from omni_rl.errors import RuntimeFailure
from omni_rl_pipelines.pipeline_model import FULL_TRANSFORMER_DIR, PipelineModel


class FullFineTuningChecks:
    """Mix in before a :class:`~omni_rl.testing.ModelConformance` subclass whose model has ``lora_rank = 0``.

    There are no adapters to switch off, and ``save_lora`` writes the whole transformer, not a LoRA file: the two
    suite tests that assume LoRA are replaced by checks of that documented behaviour, and the reference view is
    checked to be the frozen copy :meth:`~PipelineModel.keep_reference_copy` keeps. Every other check of the suite
    applies unchanged."""

    def test_disabled_adapters_are_the_reference_policy(self, component: PipelineModel) -> None:
        """Without a reference copy there is no reference policy: asking for one must say so, not return the
        policy."""
        with pytest.raises(RuntimeFailure, match="lora_rank = 0"), component.disable_adapters():
            pass

    def test_save_and_load_lora_round_trip(
        self, component: PipelineModel, image_size: tuple[int, int], prompts: list[str], tmp_path: Path
    ) -> None:
        self._perturb_lora(component, seed=1)  # type: ignore[attr-defined]
        saved = self._velocity(component, image_size, prompts, 1.0)  # type: ignore[attr-defined]
        component.save_lora(tmp_path)
        assert (tmp_path / FULL_TRANSFORMER_DIR / "config.json").is_file()
        assert not (tmp_path / "pytorch_lora_weights.safetensors").exists()
        self._perturb_lora(component, seed=2)  # type: ignore[attr-defined]
        assert not torch.allclose(self._velocity(component, image_size, prompts, 1.0), saved)  # type: ignore[attr-defined]
        component.load_lora(tmp_path)
        torch.testing.assert_close(self._velocity(component, image_size, prompts, 1.0), saved)  # type: ignore[attr-defined]

    def test_reference_copy_is_the_pretrained_transformer(
        self, component: PipelineModel, image_size: tuple[int, int], prompts: list[str]
    ) -> None:
        velocity = self._velocity  # type: ignore[attr-defined]
        component.keep_reference_copy()
        try:
            reference = velocity(component, image_size, prompts, 1.0)
            self._perturb_lora(component, seed=3)  # type: ignore[attr-defined]
            assert not torch.allclose(velocity(component, image_size, prompts, 1.0), reference)
            with component.disable_adapters():
                torch.testing.assert_close(velocity(component, image_size, prompts, 1.0), reference)
        finally:
            component.reference_transformer = None  # the class's model again has no reference view


class ReplayingGraphBackend:
    """A CPU stand-in for :class:`~omni_rl_pipelines.cuda_graphs.CudaGraphBackend` with a CUDA graph's data flow: the
    capture runs the call once on the static inputs and keeps its output tensors, and each replay runs it again on
    whatever those static inputs now hold and writes the result into the same output tensors. A caller that forgot
    to copy new inputs in, or kept a static output it should have cloned, sees stale numbers here as it would on a
    GPU. (It checks the plumbing; the capture itself needs CUDA: tests/gpu.)"""

    def __init__(self) -> None:
        #: how many times a call was captured
        self.captured = 0

    def capture(self, run: Callable[[], Any]) -> tuple[Callable[[], None], Any]:
        output = run()
        self.captured += 1

        def replay() -> None:
            fresh = run()
            for static, value in zip(_tensors(output), _tensors(fresh), strict=True):
                static.copy_(value)

        return replay, output


def _tensors(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def first_update_ratio(model: Any, sampler: Any, batch: Any) -> tuple[float, torch.Tensor]:
    """The first update over ``batch`` (Flow-GRPO, four samples, learning rate 0): its mean on-policy ratio, and the
    old log-probs the update engine recomputes (what a speed option that makes the rollout run other code than
    the trained forward must still get right)."""
    from omni_rl import build
    from omni_rl.config.schema import OptimConfig
    from omni_rl.engine.trajectory_update import TrajectoryUpdate

    params = list(model.trainable_parameters())
    engine = TrajectoryUpdate(
        model, sampler, build("loss", "flow_grpo", {}), torch.optim.SGD(params, lr=0.0), OptimConfig(micro_batch=4)
    )
    old, _ = engine.old_views(batch, keep_steps=False)
    advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])
    stats = engine.run(batch, advantages, {}, generator=torch.Generator().manual_seed(0))
    return stats["sums"]["ratio_mean"] / stats["counts"]["ratio_mean"], old
