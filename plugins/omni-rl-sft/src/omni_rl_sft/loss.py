"""``sft``: supervised flow matching on demonstrations (docs/math.md#sft-loss).

Per selected sample, one (t, ε) from its own generator: x_t = (1 - t)·x₀ + t·ε, u = ε - x₀,
e = mean_dims (v_θ(x_t, t) - u)², L = mean over the selected samples of e. The demonstrations are the rollout's
own best samples (``select = "best"``: online SFT, RAFT), the chosen images of a preference file (``"chosen"``,
read and VAE-encoded by the dpo plugin's ``preference_pairs`` backend) or every sample (``"all"``). The same term,
on the chosen sample of a pair, is the ``dpo`` loss's ``sft_weight``. No reference is evaluated.
"""

from __future__ import annotations

from typing import Any

import torch
from omni_rl_dpo.draws import draws
from omni_rl_dpo.loss import flow_matching_error
from torch import Tensor

from omni_rl.batch import ForwardLossInputs, LossOutput
from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import LossRequirements
from omni_rl_sft.config import SFTLossConfig
from omni_rl_sft.select import SELECTED, SKIPPED, WEIGHT, select


class SFTLoss:
    """Flow matching on the selected samples; only the current view."""

    def __init__(self, config: SFTLossConfig) -> None:
        self.config = config
        # groups stay whole only because "best" and "chosen" were decided on whole groups in prepare; the loss
        # itself is per sample, so samples may be split freely
        self.requirements = LossRequirements(inputs="forward", views=frozenset({"current"}), timesteps=config.timesteps)

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        return select(rewards, group_ids, mode=self.config.select, min_spread=self.config.min_reward_spread)

    def __call__(self, inputs: ForwardLossInputs) -> LossOutput:
        cfg = self.config
        extras = inputs.extras
        if WEIGHT not in extras:
            raise RuntimeFailure(
                "sft: the batch has no selection (the sft_weight extra is missing)",
                hint="pass extras=loss.prepare(rewards, advantages, group_ids) when calling the loss directly",
            )
        batch = inputs.x0.shape[0]
        counts = {"selected": float(extras[SELECTED][0]), "groups_skipped": float(extras[SKIPPED][0])}
        picked = torch.nonzero(extras[WEIGHT] > 0).flatten()
        x0 = inputs.x0.float()
        if picked.numel() == 0:  # a zero loss that still reaches every trained weight (see omni_rl_dpo.loss)
            first = torch.zeros(1, dtype=torch.long, device=x0.device)
            v = inputs.velocity("current", x0[:1], torch.full((1,), 0.5, device=x0.device), first)
            return LossOutput(loss=0.0 * v.sum(), metrics={"sft_mse": 0.0, **counts})
        shape = tuple(x0.shape[1:])
        made = [
            draws(
                inputs.generators[i],
                shape,
                count=1,
                timestep_index=inputs.timestep_index,
                timesteps=cfg.timesteps,
                mean=cfg.logit_mean,
                std=cfg.logit_std,
                time_range=cfg.timestep_range,
                stratified=False,
            )
            for i in picked.tolist()
        ]
        picked = picked.to(x0.device)
        t = torch.cat([m[0] for m in made]).to(x0.device)
        noise = torch.cat([m[1] for m in made]).to(x0.device)
        clean = x0[picked]
        expand = t.view(-1, *([1] * len(shape)))
        x_t = (1.0 - expand) * clean + expand * noise
        e = flow_matching_error(inputs.velocity("current", x_t, t, picked), noise - clean)
        scale = extras[WEIGHT][picked.to(extras[WEIGHT].device)].float().to(e.device) / batch
        loss = (scale * e).sum()
        metrics: dict[str, Any] = {"sft_mse": float((scale * e.detach()).sum()), **counts}
        return LossOutput(loss=loss, metrics=metrics)
