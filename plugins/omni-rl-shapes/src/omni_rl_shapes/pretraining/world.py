"""What a pretraining run renders and scores: still scenes (the image models) or clips (the motion model).

:mod:`pretrain` is one recipe (VAE stage, flow matching, evaluations, stop rule); the world decides its prompt
sets, how a training sample is drawn (clean, or with the last stage's flaw) and how a VAE round trip is scored.
The image world's flaw is stray objects (``--stray-rate``, ``--strays``); the motion world's is one of
:data:`omni_rl_shapes.motion.render.Flaw` (``--flaw``, ``--flaw-rate``), e.g. clips that move the wrong way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import numpy as np

from omni_rl_shapes.motion.render import DISTANCE_RANGE

#: the values of ``--flaw`` (omni_rl_shapes.motion.render.Flaw)
MOTION_FLAWS = ("reverse", "still", "flicker", "recolor")
#: offset of the generator that decides whether a motion training clip is flawed (apart from its layout's seed)
_FLAW_SEED = 7_919


class World(Protocol):
    """The data side of a pretraining run; samples are uint8 (H, W, 3) images or (F, H, W, 3) clips."""

    name: str

    def prompts(self, split: str) -> list[str]: ...

    def render(self, prompt: str, size: int, seed: int) -> np.ndarray: ...

    def render_train(self, prompt: str, size: int, seed: int, args: Any) -> np.ndarray: ...

    def scores(self, samples: np.ndarray, prompts: Sequence[str]) -> list[float]: ...

    def describe_flaw(self, args: Any) -> str: ...


@attrs.frozen
class ImageWorld:
    """Still scenes of the shapes grammar, with stray objects as the flaw."""

    name: str = "image"

    def prompts(self, split: str) -> list[str]:
        from omni_rl_shapes import read_prompts

        return read_prompts(split)

    def render(self, prompt: str, size: int, seed: int) -> np.ndarray:
        from omni_rl_shapes.render import render

        return render(prompt, size, seed)

    def render_train(self, prompt: str, size: int, seed: int, args: Any) -> np.ndarray:
        from omni_rl_shapes.render import render_with_stray

        return render_with_stray(prompt, size, seed, args.stray_rate, args.strays)

    def scores(self, samples: np.ndarray, prompts: Sequence[str]) -> list[float]:
        from omni_rl_shapes.verify import verify

        return [verify(image, p).score for image, p in zip(samples, prompts, strict=True)]

    def describe_flaw(self, args: Any) -> str:
        return f"stray-object rate {args.stray_rate}, {args.strays} per scene"


@attrs.frozen
class MotionWorld:
    """Clips of single-object motion prompts (:mod:`omni_rl_shapes.motion.prompts`), ``frames`` long, each object
    travelling a distance drawn from ``travel`` (fractions of the side), with a motion flaw."""

    frames: int = 5
    travel: tuple[float, float] = DISTANCE_RANGE
    name: str = "motion"

    def prompts(self, split: str) -> list[str]:
        from omni_rl_shapes.motion.prompts import read_motion_prompts

        return read_motion_prompts(split)

    def render(self, prompt: str, size: int, seed: int) -> np.ndarray:
        from omni_rl_shapes.motion.render import render_clip

        return render_clip(prompt, size, self.frames, seed, travel=self.travel)

    def render_train(self, prompt: str, size: int, seed: int, args: Any) -> np.ndarray:
        """A clean clip, or with probability ``--flaw-rate`` the ``--flaw`` one; the coin has its own generator,
        so a clip's layout and travel are the same flawed or not."""
        from omni_rl_shapes.motion.render import render_clip

        flawed = args.flaw is not None and np.random.default_rng([_FLAW_SEED, seed]).random() < args.flaw_rate
        return render_clip(prompt, size, self.frames, seed, flaw=args.flaw if flawed else None, travel=self.travel)

    def scores(self, samples: np.ndarray, prompts: Sequence[str]) -> list[float]:
        from omni_rl_shapes.motion.verify import verify_clip

        return [verify_clip(clip, p).score for clip, p in zip(samples, prompts, strict=True)]

    def describe_flaw(self, args: Any) -> str:
        return f"flaw {args.flaw} at rate {args.flaw_rate}"
