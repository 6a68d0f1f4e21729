"""omni-rl's model conformance suite on ``wan_i2v`` (Wan2.1 I2V, Wan2.2 I2V-A14B) and ``wan_ti2v`` (Wan2.2 TI2V):
the suite encodes through ``encode_conditions`` with random first frames of two sizes (each resized to the output
size, so the condition always matches the latents), checks the spec's ``condition_images`` against the model's,
and that the velocity follows the first frame. The hooks module's own suite is test_wan_conformance's."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest
from omni_rl_pipelines.testing import FullFineTuningChecks
from omni_rl_wan import hooks
from wan_i2v_helpers import FRAMES, LAYOUTS, build_i2v_model

from omni_rl.specs import ModelSpec
from omni_rl.testing import ModelConformance


def _spec(name: str) -> ModelSpec:
    (spec,) = [s for s in hooks.omni_rl_models() if s.name == name]
    return spec


class TestWan21I2VModel(ModelConformance):
    layout = "wan21_i2v"
    #: TOML-shaped options beyond the path: LoRA rank 4 with alpha 8 (a scale other than 1)
    extra: ClassVar[dict[str, Any]] = {"lora_rank": 4, "lora_alpha": 8.0}

    @pytest.fixture
    def spec(self) -> ModelSpec:
        return _spec(LAYOUTS[self.layout].model)

    @pytest.fixture
    def options(self, tiny_i2v_paths: dict[str, Path]) -> dict[str, Any]:
        return {"path": str(tiny_i2v_paths[self.layout]), **self.extra}

    @pytest.fixture(scope="class")
    def component(self, tiny_i2v_paths: dict[str, Path]) -> Any:
        return build_i2v_model(tiny_i2v_paths[self.layout], LAYOUTS[self.layout].model, **self.extra)

    @pytest.fixture
    def image_size(self) -> tuple[int, int]:
        return (LAYOUTS[self.layout].size,) * 2


class TestWan22I2VModel(TestWan21I2VModel):
    """Two experts and no image encoder."""

    layout = "wan22_i2v"


class TestWan22TI2VModel(TestWan21I2VModel):
    """First-frame replacement: 0 or 1 first frames per prompt (the suite gives one).

    The suite's latents are one frame by default, and a one-frame clip from a first frame is that frame: TI2V's
    velocity there points at the condition whatever the weights, so the suite's LoRA checks would see no change.
    Its latents here have 5 frames (2 latent frames), and the shape check follows them."""

    layout = "wan22_ti2v"

    def _latents(self, model: Any, image_size: tuple[int, int], batch: int) -> Any:
        import torch

        shape = model.latent_shape(*image_size, num_frames=FRAMES)
        return torch.randn((batch, *shape), generator=torch.Generator().manual_seed(0)).to(model.device)

    @pytest.mark.parametrize("cfg", [1.0, 4.5])
    def test_velocity_is_shaped_like_latents_in_float32(
        self, component: Any, image_size: tuple[int, int], prompts: list[str], cfg: float
    ) -> None:
        import torch

        velocity = self._velocity(component, image_size, prompts, cfg)
        assert velocity.shape == (len(prompts), *component.latent_shape(*image_size, num_frames=FRAMES))
        assert velocity.dtype == torch.float32 and bool(torch.isfinite(velocity).all())


class TestWan21I2VFullFineTuning(FullFineTuningChecks, TestWan21I2VModel):
    """``lora_rank = 0``: the whole 36-channel transformer trains."""

    extra: ClassVar[dict[str, Any]] = {"lora_rank": 0, "lora_alpha": None}
