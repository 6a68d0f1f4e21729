"""``dpo``: Diffusion-DPO in flow form (docs/math.md#diffusion-dpo-loss), on pairs (chosen w, rejected l) of one prompt.

For each pair, with one t ~ logit-normal and one ε shared by both images:

- x_t = (1 - t)·x₀ + t·ε, target velocity u = ε - x₀ (for x₀ = x₀^w and x₀ = x₀^l)
- e = mean_dims (v - u)² for the current policy θ and the reference (adapters off)
- inside = -(β/2)·[(e_θ^w - e_ref^w) - (e_θ^l - e_ref^l)]
- L = -mean_pairs log σ(inside)

This follows the reference implementation (Salesforce ``DiffusionDPO/train.py``) where it differs from the
paper: the paper's objective has weight -β·T·ω(λ_t) on squared L2 *norms*; the implementation uses the *mean*
over latent elements and the constant scale -β/2, and so do we (β values carry over from its runs). The flow
form swaps the ε-prediction target for the velocity target u = ε - x₀ and the uniform discrete timestep for
SD3's logit-normal t; everything else (shared t and ε per pair, the reference under no_grad, the implicit
accuracy as the fraction of inside > 0) is the reference's.

The reference also draws a fresh VAE posterior sample per step for offline data; here offline latents are
encoded once (the posterior mean, see ``preference_rollout``).
"""

from __future__ import annotations

from typing import Any

import attrs
import torch
import torch.nn.functional as F
from torch import Tensor

from omni_rl.batch import ForwardLossInputs, LossOutput
from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import LossRequirements
from omni_rl_dpo import pairing
from omni_rl_dpo.config import DPOLossConfig
from omni_rl_dpo.draws import pair_draw


@attrs.frozen
class DPOTerms:
    """Per-pair quantities of the objective, each of shape (P,)."""

    #: -(β/2)·[(e_θ^w - e_ref^w) - (e_θ^l - e_ref^l)], the implicit reward margin
    inside: Tensor
    #: implicit rewards -(β/2)·(e_θ - e_ref) of the chosen and of the rejected sample (inside = chosen - rejected)
    reward_chosen: Tensor
    reward_rejected: Tensor
    #: -log σ(inside)
    loss: Tensor


def dpo_terms(e_theta_w: Tensor, e_theta_l: Tensor, e_ref_w: Tensor, e_ref_l: Tensor, beta: float) -> DPOTerms:
    """The DPO objective per pair from the four per-sample flow-matching errors (float32)."""
    scale = -0.5 * beta
    reward_chosen = scale * (e_theta_w - e_ref_w)
    reward_rejected = scale * (e_theta_l - e_ref_l)
    inside = scale * ((e_theta_w - e_theta_l) - (e_ref_w - e_ref_l))
    return DPOTerms(inside, reward_chosen, reward_rejected, -F.logsigmoid(inside))


def flow_matching_error(velocity: Tensor, target: Tensor) -> Tensor:
    """e = mean over every non-batch dim of (v - u)², float32, shape (B,)."""
    return (velocity.float() - target).pow(2).flatten(1).mean(dim=1)


def match_pairs(roles: Tensor, group_ids: Tensor) -> tuple[Tensor, Tensor]:
    """(chosen positions, rejected positions) of the micro-batch's pairs, matched by group, in chosen order.

    Raises when a group has a chosen sample without its rejected one (or several of either): the update keeps
    groups whole (``batch_unit = "group"``), so that means the extras and the batch disagree.
    """
    chosen = torch.nonzero(roles == pairing.CHOSEN).flatten()
    rejected = torch.nonzero(roles == pairing.REJECTED).flatten()
    by_group: dict[int, int] = {}
    for position in rejected.tolist():
        gid = int(group_ids[position])
        if gid in by_group:
            raise RuntimeFailure(f"dpo: group {gid} has two rejected samples", hint=_PAIR_HINT)
        by_group[gid] = position
    partners = []
    for position in chosen.tolist():
        gid = int(group_ids[position])
        if gid not in by_group:
            raise RuntimeFailure(f"dpo: group {gid} has a chosen sample but no rejected one", hint=_PAIR_HINT)
        partners.append(by_group.pop(gid))
    if by_group:
        raise RuntimeFailure(
            f"dpo: groups {sorted(by_group)} have a rejected sample but no chosen one", hint=_PAIR_HINT
        )
    return chosen, torch.as_tensor(partners, dtype=torch.long, device=roles.device)


_PAIR_HINT = (
    "each micro-batch must hold whole groups with the dpo_role extras prepare computed for them; this is a bug in "
    "the update engine or the rollout backend, please report it"
)


class DPOLoss:
    """Diffusion-DPO on pairs; evaluates the current policy (with gradients) and the reference (without)."""

    def __init__(self, config: DPOLossConfig) -> None:
        self.config = config
        self.requirements = LossRequirements(
            inputs="forward",
            views=frozenset({"current", "reference"}),
            timesteps=config.timesteps,
            batch_unit="group",
        )

    def setup(self, model: Any) -> None:
        """Full fine-tuning has no adapters to switch off: ask the model to keep a frozen reference copy now,
        before a checkpoint is loaded, so the reference is the pretrained model (a no-op with LoRA)."""
        keep = getattr(model, "keep_reference_copy", None)
        if keep is not None:
            keep()

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        """The pairs of the whole batch (see :mod:`omni_rl_dpo.pairing`); advantages are not used."""
        if self.config.pairing == "offline":
            return pairing.pair_in_order(group_ids)
        if self.config.pairing == "all_pairs":
            return pairing.pair_all_by_reward(rewards, group_ids, min_spread=self.config.min_reward_spread)
        return pairing.pair_by_reward(rewards, group_ids, min_spread=self.config.min_reward_spread)

    def __call__(self, inputs: ForwardLossInputs) -> LossOutput:
        extras = inputs.extras
        if pairing.ROLE not in extras:
            raise RuntimeFailure(
                "dpo: the batch has no pairing (the dpo_role extra is missing)",
                hint="the trainer passes loss.prepare(...)'s tensors as extras; when calling the loss directly, "
                "pass extras=loss.prepare(rewards, advantages, group_ids)",
            )
        roles = extras[pairing.ROLE]
        batch = roles.shape[0]
        counts = {
            "pairs": float(extras[pairing.PAIRS][0]),
            "groups_skipped": float(extras[pairing.GROUPS_SKIPPED][0]),
        }
        if self.config.pairing == "all_pairs":
            samples, first, draw_of, chosen_at, rejected_at = self._all_pairs(roles, inputs, extras)
        else:
            chosen, rejected = match_pairs(roles, inputs.group_ids)
            samples = torch.cat([chosen, rejected])
            first = chosen
            chosen_at = torch.arange(chosen.numel(), device=roles.device)
            rejected_at = chosen_at + chosen.numel()
            draw_of = torch.cat([chosen_at, chosen_at])  # the chosen and its rejected share the pair's draw
        if chosen_at.numel() == 0:
            return self._no_pairs(inputs, counts)

        # One (t, ε) per pair, or per group with all_pairs: drawn from the generator of ``first`` (the pair's chosen
        # sample; the group's first member), repeated for every sample that shares it.
        x0 = inputs.x0.float()
        draws = [
            pair_draw(
                inputs.generators[i],
                tuple(x0.shape[1:]),
                mean=self.config.logit_mean,
                std=self.config.logit_std,
            )
            for i in first.tolist()
        ]
        draw_of = draw_of.to(x0.device)
        t = torch.cat([d[0] for d in draws]).to(x0.device)[draw_of]
        noise = torch.stack([d[1] for d in draws]).to(x0.device)[draw_of]
        clean = x0[samples]
        expand = t.view(-1, *([1] * (clean.ndim - 1)))
        x_t = (1.0 - expand) * clean + expand * noise
        target = noise - clean

        e_theta = flow_matching_error(inputs.velocity("current", x_t, t, samples), target)
        with torch.no_grad():
            e_ref = flow_matching_error(inputs.velocity("reference", x_t, t, samples), target)
        win, lose = chosen_at.to(e_theta.device), rejected_at.to(e_theta.device)
        terms = dpo_terms(e_theta[win], e_theta[lose], e_ref[win], e_ref[lose], self.config.beta)

        # Sum over pairs x (N / P) / B: see pairing's docstring for why this is the exact mean over the batch.
        scale = extras[pairing.WEIGHT][samples[chosen_at]].float().to(e_theta.device) / batch
        loss = (scale * terms.loss).sum()
        with torch.no_grad():
            metrics: dict[str, Any] = {
                "implicit_acc": float((scale * (terms.inside > 0).float()).sum()),
                "reward_margin": float((scale * terms.inside).sum()),
                "reward_chosen": float((scale * terms.reward_chosen).sum()),
                "reward_rejected": float((scale * terms.reward_rejected).sum()),
                "policy_mse": float((scale * 0.5 * (e_theta[win] + e_theta[lose])).sum()),
                "reference_mse": float((scale * 0.5 * (e_ref[win] + e_ref[lose])).sum()),
                **counts,
            }
        return LossOutput(loss=loss, metrics=metrics)

    def _all_pairs(
        self, roles: Tensor, inputs: ForwardLossInputs, extras: dict[str, Tensor]
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        """(samples to evaluate, each group's first member, each sample's draw (its group's), chosen and rejected
        positions into ``samples``).

        The pairs are formed again from the micro-batch's rewards (the tensor prepare paired) with
        :func:`pairing.all_pairs_of`; a group with fewer paired members here than prepare counted, or members that
        form no pair, means the micro-batch split a group.
        """
        if pairing.GROUP_PAIRED not in extras:
            raise RuntimeFailure(
                "dpo: pairing = 'all_pairs' but the batch has no dpo_group_paired extra", hint=_PAIR_HINT
            )
        rewards = inputs.rewards.detach().float().tolist()
        group_ids = inputs.group_ids.tolist()
        group_paired = extras[pairing.GROUP_PAIRED].tolist()
        members: dict[int, list[int]] = {}
        for position in torch.nonzero(roles == pairing.PAIRED).flatten().tolist():
            members.setdefault(int(group_ids[position]), []).append(position)
        samples: list[int] = []
        first: list[int] = []
        draw_of: list[int] = []
        chosen_at: list[int] = []
        rejected_at: list[int] = []
        for draw, (gid, positions) in enumerate(members.items()):
            found = pairing.all_pairs_of([rewards[p] for p in positions], min_spread=self.config.min_reward_spread)
            whole = all(int(group_paired[p]) == len(positions) for p in positions)
            if not whole or {i for pair in found for i in pair} != set(range(len(positions))):
                raise RuntimeFailure(f"dpo: group {gid}'s paired samples do not form its pairs", hint=_PAIR_HINT)
            offset = len(samples)
            samples += positions
            first.append(positions[0])
            draw_of += [draw] * len(positions)
            chosen_at += [offset + i for i, _ in found]
            rejected_at += [offset + j for _, j in found]
        return tuple(  # type: ignore[return-value]
            torch.as_tensor(values, dtype=torch.long, device=roles.device)
            for values in (samples, first, draw_of, chosen_at, rejected_at)
        )

    def _no_pairs(self, inputs: ForwardLossInputs, counts: dict[str, float]) -> LossOutput:
        """A zero loss that still reaches every trained weight: one current-policy forward of one sample times 0.

        A micro-batch of skipped groups must still backpropagate (zero) gradients, so that workers summing
        gradients see every parameter. When no micro-batch of an optimizer step on any worker has a pair, the
        summed gradient is exactly zero and the update skips that optimizer step (``no_signal_steps``), so AdamW's
        momentum and weight decay do not move the weights without a preference. It also runs the reference
        forward a micro-batch with pairs runs: with the model sharded by FSDP2 every forward is a collective, so
        every worker must run the same views in the same order.
        """
        first = torch.zeros(1, dtype=torch.long, device=inputs.x0.device)
        x = inputs.x0[:1].float()
        t = torch.full((1,), 0.5, device=x.device)
        v = inputs.velocity("current", x, t, first)
        with torch.no_grad():
            inputs.velocity("reference", x, t, first)
        zeros = dict.fromkeys(
            ("implicit_acc", "reward_margin", "reward_chosen", "reward_rejected", "policy_mse", "reference_mse"), 0.0
        )
        return LossOutput(loss=0.0 * v.sum(), metrics={**zeros, **counts})
