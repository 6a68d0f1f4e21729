"""Test helpers for the model plugins built on :class:`omni_rl_sd3.pipeline_model.PipelineModel` (SD3, FLUX,
Qwen-Image): the conformance checks of full fine-tuning, written once for all of them. Imports pytest; only tests
import this module."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from omni_rl.errors import RuntimeFailure
from omni_rl_sd3.pipeline_model import FULL_TRANSFORMER_DIR, PipelineModel


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
