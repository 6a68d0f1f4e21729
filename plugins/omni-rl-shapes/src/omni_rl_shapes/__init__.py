"""Shapes: a CPU-sized text-to-image RL benchmark for omni-rl (renderer, verifier reward, pretrained tiny SD3
and Qwen-Image pipelines), and its text-to-video side, shapes in motion (clip renderer and verifier reward, a
pretrained tiny Wan pipeline).

This module stays import-light (``hooks.py`` imports it): the renderer, verifier and pretraining code live in
their own modules and pull in numpy / PIL / torch only when imported.
"""

from __future__ import annotations

from pathlib import Path

#: prompt sources for ``[data] train`` / ``[data] val``
TRAIN_PROMPTS = "package:omni_rl_shapes:prompts/train.txt"
VAL_PROMPTS = "package:omni_rl_shapes:prompts/val.txt"
#: the motion model's prompt sources (:mod:`motion_prompts`)
MOTION_TRAIN_PROMPTS = "package:omni_rl_shapes:prompts/motion_train.txt"
MOTION_VAL_PROMPTS = "package:omni_rl_shapes:prompts/motion_val.txt"

_PACKAGE_DIR = Path(__file__).resolve().parent


def read_prompts(split: str) -> list[str]:
    """The shipped ``"train"`` or ``"val"`` prompt set, one prompt per list item."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    return (_PACKAGE_DIR / "prompts" / f"{split}.txt").read_text(encoding="utf-8").splitlines()


#: the shipped pretrained pipelines, by architecture (``package:omni_rl_shapes:<directory>`` in a config)
PRETRAINED_DIRS = {"sd3": "pretrained", "qwen_image": "pretrained_qwen_image", "wan": "pretrained_wan_motion"}


def pretrained_path(arch: str = "sd3") -> Path:
    """Directory of the shipped tiny pipeline of ``arch`` (``"sd3"``: ``StableDiffusion3Pipeline``;
    ``"qwen_image"``: ``QwenImagePipeline``; ``"wan"``: the shapes-in-motion ``WanPipeline``), in diffusers
    ``save_pretrained`` layout, for loading by path.

    Raises ``FileNotFoundError`` when the package was built without it (``python -m omni_rl_shapes.pretrain``
    with ``--arch`` writes one; the plugin README has the recipe).
    """
    if arch not in PRETRAINED_DIRS:
        raise ValueError(f"arch must be one of {sorted(PRETRAINED_DIRS)}, got {arch!r}")
    path = _PACKAGE_DIR / PRETRAINED_DIRS[arch]
    if not (path / "model_index.json").is_file():
        raise FileNotFoundError(
            f"no pretrained shapes pipeline at {path}; create it with python -m omni_rl_shapes.pretrain --arch {arch}"
        )
    return path
