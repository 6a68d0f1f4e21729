"""The ``dance_grpo`` algorithm preset: DanceGRPO's reference recipe on SD3.5-Medium, sized for one machine.

Sources: the paper (Xue et al., "DanceGRPO: Unleashing GRPO on Visual Generation", 2025) and its reference
implementation, XueZeyue/DanceGRPO (``scripts/finetune/finetune_flux_grpo*.sh``, ``fastvideo/train_grpo_flux.py``):

- ``dance_sde`` with η = 0.3 (the scripts' ``--eta 0.3``). Its log-prob is the exact Gaussian density; the
  reference's drops the constants by accident (see ``omni_rl_dance_grpo.sampler``), which cancel in the ratio.
- The whole schedule is stochastic and trained but the last step (``window_size = 0``): the reference samples every
  step with the SDE and ``--ignore_last`` leaves the last one out of training. Here the last step (to σ' = 0) is an
  Euler step; the reference also adds noise there, which only perturbs the final image.
- ``timestep_fraction = 0.6`` (the scripts' ``--timestep_fraction 0.6``): each sample trains ceil(0.6·9) = 6 of
  the 9 window steps, its own random subset (the reference draws a permutation per sample and truncates:
  ``int(0.6·15) = 9`` of its 15; the two agree whenever f·W is whole).
- One x_T per group (``--init_same_noise``): the diffusers backend's ``shared_initial_noise``.
- ``grpo`` advantages within each prompt's group (``--use_group``), divided by the sample std (``torch.std``:
  ``std_ddof = 1``). The reference adds 1e-8 to the std; this keeps the grpo advantage's 1e-4, which differs only
  for near-constant groups, where 1e-8 would blow float noise in a rule-based reward up to the ±5 advantage clip.
- Several rewards are combined per advantage (``aggregate = "advantage"``), as DanceGRPO's multi-reward training
  (HPS + CLIP) does: each reward is normalised alone and the advantages are summed with the reward weights. With
  one reward of weight 1 this is the plain advantage.
- ``flow_grpo`` loss: ratio clip 1e-4 (``--clip_range 1e-4``), advantage clip 5 (``--adv_clip_max 5.0``), no KL
  (the reference has none; ``kl_coef > 0`` works with ``dance_sde``, whose std is positive at every step).
- 10 steps, CFG 4.5, group size 8, taken from the ``flow_grpo`` preset (as the loss above, whose options are the
  reference's too): SD3.5-M's sampling settings, and a group that fits one machine's rollout (the reference
  samples 16 FLUX steps, guidance-distilled, 12 images per prompt on 8+ GPUs). The learning rate is left to
  ``[optim]`` (the reference fine-tunes every weight at 1e-5; a LoRA needs more).
"""

from __future__ import annotations

from typing import Any

from omni_rl_flow_grpo.presets import flow_grpo_defaults


def dance_grpo_defaults() -> dict[str, dict[str, Any]]:
    """A fresh copy of the preset's sections (TOML-shaped), so no caller can alter another's defaults: the
    ``flow_grpo`` preset's loss and rollout with one x_T per group, DanceGRPO's sampler and advantage options."""
    defaults = flow_grpo_defaults()
    defaults["sampler"] = {
        "name": "dance_sde",
        "options": {"noise_level": 0.3, "window_size": 0, "timestep_fraction": 0.6},
    }
    defaults["advantage"]["options"].update(global_std=False, std_ddof=1, aggregate="advantage")
    defaults["rollout"]["options"]["shared_initial_noise"] = True
    return defaults
