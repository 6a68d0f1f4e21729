"""Option records of the ``dpo`` loss and the ``preference_pairs`` rollout backend.

Kept apart from the component modules so that ``hooks.py`` can hand these classes to the registry (which
validates each section's ``options`` against them) without importing torch.
"""

from __future__ import annotations

from typing import Literal

import attrs

from omni_rl.validators import finite, image_side, non_negative_finite, positive_finite, positive_int

PAIRINGS: tuple[str, ...] = ("reward", "all_pairs", "offline")


@attrs.frozen(kw_only=True)
class DPOLossConfig:
    """Options of the ``dpo`` loss (Diffusion-DPO in flow form, docs/math.md#diffusion-dpo-loss).

    ``pairing`` says where the (chosen, rejected) pairs come from: ``"reward"`` pairs the best and the worst
    reward of each prompt's group (online DPO on the policy's own rollouts); ``"all_pairs"`` takes every pair of a
    group whose rewards differ by more than ``min_reward_spread``, each pair sharing the group's (t, ε) draw;
    ``"offline"`` takes each group as
    (chosen, rejected) in that order, which is how the ``preference_pairs`` rollout backend returns a
    preference file's pairs (the rewards are then only logged).
    """

    #: β of inside = -(β/2)[(e_θ^w - e_ref^w) - (e_θ^l - e_ref^l)]; the Diffusion-DPO reference trains with 5000
    beta: float = attrs.field(default=5000.0, converter=float, validator=positive_finite)
    #: "reward": best vs worst reward of each group; "all_pairs": every higher/lower pair of each group;
    #: "offline": each group is (chosen, rejected) in order
    pairing: Literal["reward", "all_pairs", "offline"] = attrs.field(
        default="reward", validator=attrs.validators.in_(PAIRINGS)
    )
    #: online pairing skips (and counts) groups whose best - worst reward is not above this; 0 skips only ties
    min_reward_spread: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)
    #: t = sigmoid(logit_mean + logit_std * z), z ~ N(0, 1): SD3's logit-normal training density (0, 1)
    logit_mean: float = attrs.field(default=0.0, converter=float, validator=finite)
    logit_std: float = attrs.field(default=1.0, converter=float, validator=positive_finite)
    #: (t, ε) draws per pair and update, each its own forward/backward (the reference draws one)
    timesteps: int = attrs.field(default=1, validator=positive_int)


@attrs.frozen(kw_only=True)
class PreferencePairsConfig:
    """Options of the ``preference_pairs`` rollout backend: offline (prompt, chosen, rejected) image pairs.

    The pairs are the run's training prompts: ``[data] train`` is a ``.jsonl`` file whose lines look like
    ``{"prompt": "a red circle", "chosen": "good.png", "rejected": "bad.png"}``, or a ``.parquet`` file with those
    columns (or Pick-a-Pic's ``caption``, ``jpg_0``, ``jpg_1``, ``label_0``) whose images are paths or encoded
    bytes (:mod:`omni_rl_dpo.preference_images`). Images are scaled to cover
    ``height`` x ``width`` and centre-cropped, then encoded to latents by the model's VAE. Validation
    (``mode = "eval"``) samples images with the current policy through the ``diffusers`` backend's ODE.
    """

    #: training image size: every preference image is resized and centre-cropped to it; also the val size
    height: int = attrs.field(default=512, validator=image_side)
    width: int = attrs.field(default=512, validator=image_side)
    #: directory that relative image paths are resolved against ("" = the working directory)
    image_root: str = ""
    #: keep each image and its latents in worker memory, so every image is read and encoded once per run
    cache_latents: bool = True
    #: images per VAE encode (and samples per forward in validation)
    batch_size: int = attrs.field(default=8, validator=positive_int)
    #: validation sampling: Euler steps and guidance scale of the ``diffusers`` backend's eval rollout
    eval_steps: int = attrs.field(default=20, validator=positive_int)
    eval_cfg: float = attrs.field(default=4.5, converter=float, validator=non_negative_finite)
