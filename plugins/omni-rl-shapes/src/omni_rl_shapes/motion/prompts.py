"""The fixed train / val prompt sets of the shapes-in-motion model (``python -m omni_rl_shapes.motion.prompts``).

Single-object motion prompts only ("a red circle moving to the right"): 12 objects x 4 directions. The
relation prompts of the grammar ("..., both moving down") are left out of the shipped model's world on purpose:
a model small enough to pretrain and fine-tune on one CPU core in minutes learns one moving object, and one
object already carries everything RL has to fix in a clip (direction, travel, a steady identity).

Val is held out by combination: each object gets one direction in val and the other three in train, so val
asks for object-direction pairs the model never saw together, as the still benchmark's val asks for unseen scenes.
The split is a pure function of :data:`SEED`; ``--check`` compares the shipped files byte for byte.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from omni_rl_shapes.motion.scenes import DIRECTIONS, MotionScene
from omni_rl_shapes.scenes import COLORS, SHAPES, single

SEED = 20260301
PROMPT_DIR = Path(__file__).parent.parent / "prompts"  # the package's prompts/, beside the image prompt sets
#: file names in ``prompts/``; ``package:omni_rl_shapes:prompts/motion_train.txt`` in a config
FILES = {"train": "motion_train.txt", "val": "motion_val.txt"}


def split(seed: int = SEED) -> tuple[list[str], list[str]]:
    """(train, val): 36 and 12 prompts, disjoint, every object and every direction in both."""
    rng = random.Random(seed)
    directions = list(DIRECTIONS)
    train, val = [], []
    for i, (color, shape) in enumerate((c, s) for c in COLORS for s in SHAPES):
        held = directions[(i + rng.randrange(len(directions))) % len(directions)]
        for direction in directions:
            prompt = MotionScene(single(color, shape), direction).prompt
            (val if direction == held else train).append(prompt)
    rng.shuffle(train)
    rng.shuffle(val)
    return train, val


def read_motion_prompts(split_name: str) -> list[str]:
    """The shipped ``"train"`` or ``"val"`` motion prompts."""
    if split_name not in FILES:
        raise ValueError(f"split must be 'train' or 'val', got {split_name!r}")
    return (PROMPT_DIR / FILES[split_name]).read_text(encoding="utf-8").splitlines()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write (or --check) the shipped motion prompt files.")
    parser.add_argument("--check", action="store_true", help="exit 1 when the shipped files differ")
    args = parser.parse_args(argv)
    for name, prompts in zip(("train", "val"), split(), strict=True):
        text = "\n".join(prompts) + "\n"
        path = PROMPT_DIR / FILES[name]
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                print(f"{path} differs from the split; rerun without --check", file=sys.stderr)
                return 1
        else:
            path.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
