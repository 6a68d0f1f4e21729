"""The GenEval scorer: detector + colour classifier + rules, loaded once on first use.

Shared by the reward and the benchmark so a training reward and an evaluation score the same way. The models
load on the first call, not when built (building is a config check; the device is chosen in the process that
scores, e.g. a Ray reward actor's own GPU), and are dropped when the scorer is pickled to another process.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import numpy as np
from omni_rl_rewards_clip.lazy import LazyModels
from omni_rl_rewards_clip.loading import Owner

from omni_rl.errors import RuntimeFailure
from omni_rl_geneval.config import GenEvalConfig
from omni_rl_geneval.metadata import check_metadata
from omni_rl_geneval.preflight import raise_model_problems
from omni_rl_geneval.rules import Thresholds, Verdict, evaluate, keep_all


@attrs.frozen
class _Loaded:
    detector: Any
    colors: Any


class GenEvalScorer(LazyModels):
    """``verdicts(images, metadata)``: one :class:`~omni_rl_geneval.rules.Verdict` per uint8 (H, W, 3) image."""

    config: GenEvalConfig

    def __init__(self, config: GenEvalConfig, ctx: Any = None, name: str = "geneval") -> None:
        # the detector and CLIP sources are checked now; errors name them by path ($.reward[0].options.detector)
        super().__init__(config, ctx, name, ("detector", "clip_model"))
        raise_model_problems(config, self.owner)  # the hub off and a model not cached: fail now, not at the 1st batch
        self.limits = Thresholds(
            threshold=config.threshold,
            counting_threshold=config.counting_threshold,
            max_objects=config.max_objects,
            nms_threshold=config.nms_threshold,
            position_threshold=config.position_threshold,
        )

    def load(self) -> _Loaded:
        from omni_rl_geneval.colors import ColorClassifier
        from omni_rl_geneval.detector import load_detector

        device = self.device
        detector = load_detector(self.config.detector, owner=self.owner, device=device)
        clip = _load_clip(self.config.clip_model, self.owner, device)
        return _Loaded(detector=detector, colors=ColorClassifier(clip, self.config.batch_size))

    def verdicts(self, images: np.ndarray, metadata: Sequence[Mapping[str, Any]]) -> list[Verdict]:
        """GenEval's verdict (with partial credit) for each image against its prompt's metadata."""
        import torch
        from PIL import Image

        for i, meta in enumerate(metadata):
            problem = check_metadata(meta)
            if problem is not None:
                raise RuntimeFailure(
                    f"the geneval reward cannot score sample {i}: its prompt metadata is not GenEval's ({problem})",
                    hint="train on a .jsonl prompt file with GenEval metadata (python -m omni_rl_geneval.make_prompts "
                    '--out FILE.jsonl) or the evaluation set; each line: {"prompt", "tag", "include", ...}',
                )
        loaded = self.loaded
        verdicts: list[Verdict] = []
        size = self.config.batch_size
        with torch.inference_mode():
            for start in range(0, len(images), size):
                chunk = [Image.fromarray(np.asarray(a, dtype=np.uint8)) for a in images[start : start + size]]
                for image, found, meta in zip(
                    chunk, loaded.detector.detect(chunk), metadata[start : start + size], strict=True
                ):
                    kept = keep_all(found, str(meta["tag"]), self.limits)

                    def colors(name: str, detections: Sequence[Any], image: Any = image) -> list[str]:
                        return loaded.colors(image, name, detections)

                    verdicts.append(evaluate(meta, kept, colors, margin=self.limits.position_threshold))
        return verdicts


def _load_clip(source: str, owner: Owner, device: str) -> Any:
    """CLIPModel + CLIPProcessor from one source (option ``clip_model``), float32 as GenEval runs it."""
    from omni_rl_rewards_clip.clip_model import load_processor, place
    from omni_rl_rewards_clip.loading import load_or_explain
    from transformers import CLIPModel

    processor = load_processor(source, reward=owner, option="clip_model")
    model = load_or_explain(CLIPModel.from_pretrained, source, reward=owner, option="clip_model", what="CLIP model")
    return place(model, processor, device=device, dtype="float32")
