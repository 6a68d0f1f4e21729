"""The ``mix_grpo`` algorithm preset: MixGRPO-Flash's reference recipe, sized for one machine.

Sources: the paper (Li et al., "MixGRPO: Unlocking Flow-based GRPO Efficiency with Mixed ODE-SDE", 2025) and its
reference implementation, Tencent-Hunyuan/MixGRPO (``scripts/finetune/finetune_flux_grpo_MixGRPO.sh`` and
``..._MixGRPO_Flash.sh``, ``fastvideo/utils/grpo_states.py``, ``fastvideo/train_grpo_flux.py``):

- ``flow_sde`` with noise level 0.7: the scripts' ``eta = 0.7`` with ``--flow_grpo_sampling`` and
  ``sde_type = "sde"``, which is Flow-GRPO's SDE step.
- A progressive window of 4 steps (its ``group_size = 4``) that starts at step 0 and moves by 1 step
  (``--prog_overlap``, ``prog_overlap_step = 1``) every 25 training steps (``iters_per_group = 25``; the Flash
  script uses 20). Its window never reaches the last two steps (``max_timesteps = sampling_steps - 2``), so the
  range is [0, steps - 2] = [0, 6]: change it with ``[rollout] steps``. The reference's ``--roll_back`` (start
  over from step 0 at the end) is not offered: the window stays at the end of the range.
- DPM-Solver++ of order 2 outside the window (the Flash script's ``dpm_algorithm_type = "dpmsolver++"``,
  ``dpm_solver_order = 2``, midpoint). The reference samples 25 steps and re-grids the steps after the window
  to 40% as many (``dpm_post_compress_ratio = 0.4``); here the whole schedule is shorter instead: 8 steps where
  the ``flow_grpo`` preset takes 10 (docs/benchmarks.md measures DPM-Solver++(2M) against Euler at equal steps
  on shapes).
- ``grpo`` advantages normalised within each prompt's group (``--use_group``: group mean and std), not by the
  batch std as Flow-GRPO's SD3 configs do. The reference divides by the sample std + 1e-8; this keeps the grpo
  advantage's defaults, the population std (``std_ddof = 0``: advantages sqrt(7/8) = 0.94 of the reference's at
  group size 8) and eps 1e-4 (which differs only for near-constant groups). With several rewards the reference
  sums per-reward advantages (``multi_reward_mix = "advantage_aggr"``); the preset keeps ``aggregate = "reward"``.
  ``std_ddof = 1`` and ``aggregate = "advantage"`` reproduce the reference's (the ``dance_grpo`` preset sets both).
- ``flow_grpo`` loss: ratio clip 1e-4 (``clip_range``), advantage clip 5 (``adv_clip_max``), no KL
  (``kl_coeff = 0``).
- One x_T per group (``--init_same_noise``): ``shared_initial_noise``.
- Group size 8 rather than its 12 (``num_generations``), CFG 4.5 for SD3 (the reference trains FLUX.1-dev, a
  guidance-distilled model), the learning rate left to ``[optim]`` (the reference fine-tunes every weight at
  1e-5; a LoRA needs more).
"""

from __future__ import annotations

from typing import Any

from omni_rl_flow_grpo.presets import flow_grpo_defaults

#: rollout steps of the preset; the window's range ends two steps before the end, as the reference's
STEPS = 8


def mix_grpo_defaults() -> dict[str, dict[str, Any]]:
    """A fresh copy of the preset's sections (TOML-shaped), so no caller can alter another's defaults: the
    ``flow_grpo`` preset's loss and rollout with 8 steps and one x_T per group, MixGRPO's sampler and per-group
    advantages."""
    defaults = flow_grpo_defaults()
    defaults["sampler"] = {
        "name": "flow_sde",
        "options": {
            "noise_level": 0.7,
            "window_size": 4,
            "window_range": [0, STEPS - 2],
            "window_mode": "progressive",
            "iters_per_group": 25,
            "window_stride": 1,
            "ode_solver": "dpm_solver_2m",
        },
    }
    defaults["advantage"]["options"]["global_std"] = False
    defaults["rollout"]["options"].update(steps=STEPS, shared_initial_noise=True)
    return defaults
