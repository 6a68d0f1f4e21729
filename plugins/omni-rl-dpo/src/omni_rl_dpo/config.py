"""Option records of the ``dpo`` loss and the ``preference_pairs`` rollout backend.

Kept apart from the component modules so that ``hooks.py`` can hand these classes to the registry (which
validates each section's ``options`` against them) without importing torch.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from omni_rl.validators import (
    finite,
    image_side,
    is_finite_number,
    non_negative_finite,
    positive_finite,
    positive_int,
    unit_interval,
)

PAIRINGS: tuple[str, ...] = ("reward", "all_pairs", "offline")
#: the reference policy of the DPO-family losses (omni_rl_dpo.reference)
REFERENCES: tuple[str, ...] = ("frozen", "synced", "ema")


def float_pair(value: Any) -> tuple[float, ...]:
    """TOML arrays arrive as lists; ints are accepted as floats (``[0, 1]``)."""
    return tuple(float(v) if is_finite_number(v) else v for v in value)


def check_timestep_range(instance: Any, attribute: attrs.Attribute, value: tuple[float, ...]) -> None:
    if len(value) != 2 or not all(is_finite_number(v) for v in value):
        raise ValueError(f"timestep_range must be two numbers [lo, hi], got {list(value)!r}")
    lo, hi = value
    if not 0.0 <= lo < hi <= 1.0:
        raise ValueError(f"timestep_range must satisfy 0 <= lo < hi <= 1, got {[lo, hi]}")


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
    #: (t, ε) draws per pair and update, each its own forward/backward and its own sigmoid (the reference draws one)
    timesteps: int = attrs.field(default=1, validator=positive_int)
    #: (t, ε) draws per pair inside one forward, whose errors are averaged *before* the sigmoid: a lower-variance
    #: estimate of the ELBO difference (``timesteps`` instead averages the losses of separate draws)
    draws_per_pair: int = attrs.field(default=1, validator=positive_int)
    #: t = lo + (hi - lo)·u with u ~ logit-normal(logit_mean, logit_std): [0, 1] is SD3's density; e.g. [0.8, 1.0]
    #: keeps the draws on the noise levels of an SDE window on the first steps (where on-policy pairs differ)
    timestep_range: tuple[float, float] = attrs.field(
        default=(0.0, 1.0), converter=float_pair, validator=check_timestep_range
    )
    #: stratified draws: the k-th of the K = timesteps x draws_per_pair draws of a pair takes its u from the k-th of
    #: K equal-probability strata of the density (one per stratum, V-GRPO's variance control)
    stratified: bool = False
    #: "frozen": the model with its LoRA off (Diffusion-DPO); "synced": a second LoRA adapter ("old") that the
    #: rollout samples from and that is set to the trained weights every ``reference_sync_every`` steps
    #: (flow_grpo's OnlineDPO); "ema": a second adapter ("ema") ref <- d·ref + (1 - d)·θ after every step (DGPO)
    reference: Literal["frozen", "synced", "ema"] = attrs.field(
        default="frozen", validator=attrs.validators.in_(REFERENCES)
    )
    #: "synced": training steps between two syncs (1 = each step's reference is the previous step's policy)
    reference_sync_every: int = attrs.field(default=1, validator=positive_int)
    #: "ema": d of ref <- d·ref + (1 - d)·θ (DGPO caps it at 0.3)
    reference_ema_decay: float = attrs.field(default=0.3, converter=float, validator=unit_interval)
    #: λ of the SFT term λ·e_θ^w added to each pair's loss: flow matching on the chosen sample, which keeps its
    #: error from rising with the rejected one's (likelihood displacement); 0 = off
    sft_weight: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)
    #: μ of the loser-gradient safeguard (Diffusion-SDPO): the rejected error's gradient is scaled by
    #: min(1, μ·‖g_w‖²/<g_w, g_l>) when <g_w, g_l> > 0 (g = v_θ - u, the output-space gradients), so that to first
    #: order the step does not raise the chosen error; 0 = off, 1 = the boundary
    loser_safeguard: float = attrs.field(default=0.0, converter=float, validator=unit_interval)


@attrs.frozen(kw_only=True)
class DGPOLossConfig:
    """Options of the ``dgpo`` loss (Group-level DPO, arXiv 2510.08425; docs/math.md#dgpo-loss).

    Every sample of a group enters one sigmoid, weighted by its advantage: inside_g = -(β/2)·Σ_i w_i·(e_θ,i -
    e_ref,i) with w_i = A_i / (Σ_j |A_j| / 2), so a group of two with advantages ±a is exactly one DPO pair.
    """

    #: β of inside_g; the authors' modes: 100 with the frozen reference, 2000 with the EMA reference
    beta: float = attrs.field(default=100.0, converter=float, validator=positive_finite)
    #: groups whose Σ|A| is not above this carry no preference and are skipped (and counted)
    min_advantage_spread: float = attrs.field(default=1e-6, converter=float, validator=non_negative_finite)
    logit_mean: float = attrs.field(default=0.0, converter=float, validator=finite)
    logit_std: float = attrs.field(default=1.0, converter=float, validator=positive_finite)
    #: draws per group and update (each its own forward/backward); draws_per_group inside one forward, averaged
    #: before the sigmoid; all members of a group share each (t, ε)
    timesteps: int = attrs.field(default=1, validator=positive_int)
    draws_per_group: int = attrs.field(default=1, validator=positive_int)
    timestep_range: tuple[float, float] = attrs.field(
        default=(0.0, 1.0), converter=float_pair, validator=check_timestep_range
    )
    stratified: bool = False
    reference: Literal["frozen", "synced", "ema"] = attrs.field(
        default="frozen", validator=attrs.validators.in_(REFERENCES)
    )
    reference_sync_every: int = attrs.field(default=1, validator=positive_int)
    reference_ema_decay: float = attrs.field(default=0.3, converter=float, validator=unit_interval)
    #: λ of an SFT term λ·Σ_{A_i > 0} ŵ_i e_θ,i (flow matching on the group's better half); 0 = off
    sft_weight: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)


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
