"""The ``ocr`` reward (Flow-GRPO's text-rendering reward): does the image show the prompt's quoted text?

Per image: OCR it, keep the strings whose confidence reaches ``min_confidence``, concatenate them in reading
order, and score the result against the prompt's quoted target with :func:`ocr_score.ocr_reward`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from omni_rl.batch import RewardResult, check_reward_images
from omni_rl_rewards.config import OcrConfig
from omni_rl_rewards.ocr_engine import Lines, OcrEngine, make_engine
from omni_rl_rewards.ocr_score import extract_target, normalize_text, ocr_reward


class OcrReward:
    """Scores images in [0, 1] by how well their OCR text matches the prompt's double-quoted text.

    details: ``ocr_accuracy`` (the score) and ``ocr_empty`` (1.0 where OCR kept no text, so the score is 0;
    its batch mean tells "renders no text at all" apart from "renders the wrong text").

    The engine is created on the first call, not in ``__init__``: building the reward stays cheap (config
    checks, listing), and a reward built in one process can be pickled to a Ray actor, which then loads
    its own onnxruntime sessions (sessions cannot be pickled).
    """

    def __init__(self, config: OcrConfig, *, engine_factory: Callable[[OcrConfig], OcrEngine] = make_engine) -> None:
        self.config = config
        self._engine_factory = engine_factory
        self._engine: OcrEngine | None = None

    @property
    def engine(self) -> OcrEngine:
        if self._engine is None:
            self._engine = self._engine_factory(self.config)
        return self._engine

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_engine"] = None
        return state

    def recognized_text(self, lines: Lines) -> str:
        """The strings confident enough to count, concatenated in reading order."""
        return "".join(text for text, confidence in lines if confidence >= self.config.min_confidence)

    def __call__(
        self, images: np.ndarray, prompts: Sequence[str], metadata: Sequence[Mapping[str, Any]]
    ) -> RewardResult:
        array = check_reward_images(images, prompts)
        # Parse every target before any OCR runs: a bad prompt fails in milliseconds, not after the batch.
        targets = [extract_target(prompt) for prompt in prompts]
        texts = [self.recognized_text(lines) for lines in self.engine.read(array)] if len(array) else []
        scores = np.array([ocr_reward(t, target) for t, target in zip(texts, targets, strict=True)], dtype=np.float64)
        empty = np.array([0.0 if normalize_text(t) else 1.0 for t in texts], dtype=np.float64)
        return RewardResult(scores=scores, details={"ocr_accuracy": scores.copy(), "ocr_empty": empty})


def build_ocr(config: OcrConfig, ctx: Any) -> OcrReward:
    """Factory of ``ocr``. Runs on CPU whatever ``ctx.device`` is (rapidocr's onnxruntime wheel is CPU)."""
    return OcrReward(config)
