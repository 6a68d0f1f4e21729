"""The ``online_sft`` (RAFT) and ``sft_offline`` presets.

- Online: the ``diffusers`` backend samples groups of 8 with the ``ode`` sampler (a forward-process loss needs
  only clean x₀), 10 steps at CFG 4.5 as the dpo preset; each group's best reward is the demonstration (RAFT's
  "reward-ranked fine-tuning", flow_grpo's OnlineSFT: the indicator of the group's maximum).
- Offline: the dpo plugin's ``preference_pairs`` backend replays a preference ``.jsonl``; the chosen image of each
  line is the demonstration.
- ``grpo`` advantages: the loss does not use them, but the trainer computes and logs one.
"""

from __future__ import annotations

from typing import Any


def online_sft_defaults() -> dict[str, dict[str, Any]]:
    return {
        "sampler": {"name": "ode"},
        "rollout": {"name": "diffusers", "options": {"group_size": 8, "steps": 10, "cfg": 4.5}},
        "advantage": {"name": "grpo"},
        "loss": {"name": "sft", "options": {"select": "best"}},
    }


def sft_offline_defaults() -> dict[str, dict[str, Any]]:
    return {
        "sampler": {"name": "ode"},
        "rollout": {"name": "preference_pairs", "options": {"eval_steps": 20, "eval_cfg": 4.5}},
        "advantage": {"name": "grpo"},
        "loss": {"name": "sft", "options": {"select": "chosen"}},
    }
