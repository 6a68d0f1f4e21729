"""Shapes: a CPU-sized text-to-image RL benchmark for omni-rl (renderer, verifier reward, pretrained tiny SD3
and Qwen-Image pipelines), and its text-to-video side, shapes in motion (clip renderer and verifier reward; its
pretrained tiny Wan pipeline ships in omni-rl-shapes-motion).

This module stays import-light (``hooks.py`` imports it): the renderer, verifier and pretraining code live in
their own modules and pull in numpy / PIL / torch only when imported.
"""

from __future__ import annotations

from pathlib import Path

#: prompt sources for ``[data] train`` / ``[data] val``
TRAIN_PROMPTS = "package:omni_rl_shapes:prompts/train.txt"
VAL_PROMPTS = "package:omni_rl_shapes:prompts/val.txt"
#: the motion model's prompt sources (:mod:`omni_rl_shapes.motion.prompts`)
MOTION_TRAIN_PROMPTS = "package:omni_rl_shapes:prompts/motion_train.txt"
MOTION_VAL_PROMPTS = "package:omni_rl_shapes:prompts/motion_val.txt"

_PACKAGE_DIR = Path(__file__).resolve().parent


def read_prompts(split: str) -> list[str]:
    """The shipped ``"train"`` or ``"val"`` prompt set, one prompt per list item."""
    if split not in ("train", "val"):
        raise ValueError(f"split must be 'train' or 'val', got {split!r}")
    return (_PACKAGE_DIR / "prompts" / f"{split}.txt").read_text(encoding="utf-8").splitlines()


#: the shipped pretrained pipelines, by architecture: (package, directory), ``package:<package>:<directory>`` in
#: a config. The motion model and the edit model are packages of their own (omni-rl-shapes-motion, omni-rl-shapes-edit)
#: so that each stays under 20 MB.
PRETRAINED_DIRS = {
    "sd3": ("omni_rl_shapes", "pretrained"),
    "qwen_image": ("omni_rl_shapes", "pretrained_qwen_image"),
    "wan": ("omni_rl_shapes_motion", "pretrained_wan_motion"),
    "qwen_image_edit": ("omni_rl_shapes_edit", "pretrained_qwen_image_edit"),
}


def pretrained_package_path(arch: str = "sd3") -> str:
    """``package:<package>:<directory>`` of the shipped pipeline of ``arch``: what a config's model path says."""
    if arch not in PRETRAINED_DIRS:
        raise ValueError(f"arch must be one of {sorted(PRETRAINED_DIRS)}, got {arch!r}")
    package, directory = PRETRAINED_DIRS[arch]
    return f"package:{package}:{directory}"


def pretrained_path(arch: str = "sd3") -> Path:
    """Directory of the shipped tiny pipeline of ``arch`` (``"sd3"``: ``StableDiffusion3Pipeline``;
    ``"qwen_image"``: ``QwenImagePipeline``; ``"wan"``: the shapes-in-motion ``WanPipeline``, shipped by
    omni-rl-shapes-motion), in diffusers ``save_pretrained`` layout, for loading by path.

    Resolved as a config's ``package:`` path is (:func:`omni_rl.package_paths.package_path`: the package found
    without running its code). Raises ``FileNotFoundError`` when its package is not installed (``pip install
    omni-rl-shapes-motion`` for ``"wan"``) or was built without it (``python -m
    omni_rl_shapes.pretraining.pretrain`` with ``--arch`` writes one; the plugin README has the recipe).
    """
    from omni_rl.errors import ConfigError
    from omni_rl.package_paths import package_path

    spec = pretrained_package_path(arch)
    package = PRETRAINED_DIRS[arch][0]
    remedy = (
        f"if it is not installed (pip install {package.replace('_', '-')}), install it; else create the pipeline "
        f"with python -m omni_rl_shapes.pretraining.pretrain --arch {arch}"
    )
    try:
        path = package_path(spec, what=f"the pretrained {arch} pipeline")
    except ConfigError as error:
        raise FileNotFoundError(f"no pretrained shapes pipeline for --arch {arch}: {error.message}; {remedy}") from None
    if not (path / "model_index.json").is_file():
        raise FileNotFoundError(f"no pretrained shapes pipeline at {path} (no model_index.json); {remedy}")
    return path
