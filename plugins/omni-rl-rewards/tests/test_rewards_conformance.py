"""omni-rl's conformance suites run on every reward of omni-rl-rewards, and on its hooks module.

The ocr reward runs the real rapidocr engine on a few small rendered words. Its ONNX sessions load on the
first call (about half a second), so each ocr class builds its reward once and shares it between tests.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from omni_rl_rewards import hooks
from omni_rl_rewards.ocr import OcrReward
from PIL import Image, ImageDraw, ImageFont

from omni_rl.config import structure_options
from omni_rl.context import BuildContext
from omni_rl.specs import RewardSpec
from omni_rl.testing import PluginConformance, RewardConformance

#: the words the ocr test images show, one per image, followed by one blank image
WORDS = ("OMNI", "CAT", "SIGN")
#: one onnxruntime thread: the engine is fast on these small images, and the test machines' cores are shared
OCR_OPTIONS: dict[str, Any] = {"num_threads": 1}


def _spec(name: str) -> RewardSpec:
    """The record called ``name`` (by name, so a reordering of the hook's list cannot swap the suites)."""
    (spec,) = [record for record in hooks.omni_rl_reward_models() if record.name == name]
    return spec


def _render_word(word: str, width: int = 128, height: int = 48, font_size: int = 28) -> np.ndarray:
    """``word`` in black, centred on a white (height, width) RGB image (PIL's built-in scalable font)."""
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=font_size)
    left, top, right, bottom = draw.textbbox((0, 0), word, font=font)
    origin = ((width - (right - left)) // 2 - left, (height - (bottom - top)) // 2 - top)
    draw.text(origin, word, fill="black", font=font)
    return np.asarray(image)


class TestRewardsPlugin(PluginConformance):
    heavy_modules = (
        *PluginConformance.heavy_modules,
        "PIL",
        "onnxruntime",
        "rapidocr_onnxruntime",
        "cv2",
        "Levenshtein",
    )

    @pytest.fixture
    def hooks_module(self) -> str:
        return "omni_rl_rewards.hooks"


class TestJpegCompressibility(RewardConformance):
    @pytest.fixture
    def spec(self) -> RewardSpec:
        return _spec("jpeg_compressibility")

    @pytest.fixture
    def options(self) -> dict[str, Any]:
        """Flow-GRPO's scale, so a non-default float option goes through the config round trip."""
        return {"scale": 500.0, "quality": 95}


class TestJpegIncompressibility(RewardConformance):
    @pytest.fixture
    def spec(self) -> RewardSpec:
        return _spec("jpeg_incompressibility")


class _OcrConformance(RewardConformance):
    """The ocr suites' shared inputs: rendered words (and a blank image) with prompts quoting them."""

    ocr_options: ClassVar[dict[str, Any]] = OCR_OPTIONS

    @pytest.fixture
    def spec(self) -> RewardSpec:
        return _spec("ocr")

    @pytest.fixture
    def options(self) -> dict[str, Any]:
        return dict(self.ocr_options)

    @pytest.fixture(scope="class")
    def component(self) -> OcrReward:
        """One reward, hence one engine, per class (the suite's default builds one per test)."""
        spec = _spec("ocr")
        return spec.factory(structure_options(spec, self.ocr_options), BuildContext())

    @pytest.fixture(scope="class")
    def images(self) -> np.ndarray:
        blank = np.full((48, 128, 3), 255, dtype=np.uint8)
        return np.stack([*(_render_word(word) for word in WORDS), blank])

    @pytest.fixture
    def prompts(self, images: np.ndarray) -> list[str]:
        return [f'a sign that says "{word}"' for word in (*WORDS, "BLANK")]


class TestOcrWithDetection(_OcrConformance):
    def test_reads_the_rendered_words(
        self, component: OcrReward, images: np.ndarray, prompts: list[str], metadata: list[dict[str, Any]]
    ) -> None:
        """The suite's images are realistic: the words score 1 and the blank image scores 0 and reads empty."""
        result = component(images, prompts, metadata)
        np.testing.assert_allclose(result.scores, [1.0, 1.0, 1.0, 0.0])
        np.testing.assert_array_equal(result.details["ocr_empty"], [0.0, 0.0, 0.0, 1.0])


class TestOcrRecognitionOnly(_OcrConformance):
    """``use_det = false`` reads each image as one text line: another code path through rapidocr."""

    ocr_options: ClassVar[dict[str, Any]] = {**OCR_OPTIONS, "use_det": False}
