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
from omni_rl_dpo.draws import draws
from omni_rl_dpo.reference import ReferencePolicy


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


#: the metrics every dpo call logs besides the pair counts
METRICS = (
    "implicit_acc",
    "reward_margin",
    "reward_chosen",
    "reward_rejected",
    "policy_mse",
    "reference_mse",
    "chosen_error_delta",
    "rejected_error_delta",
    "velocity_norm_ratio",
)


@attrs.frozen
class SampleErrors:
    """Per evaluated sample (shape (S,)), averaged over its D draws."""

    #: flow-matching error of the current policy (with gradients) and of the reference
    e_theta: Tensor
    e_ref: Tensor
    #: ‖v_θ‖ / ‖v_ref‖ (NormGuard's velocity-norm ratio)
    norm_ratio: Tensor
    #: v_θ - u of every draw, detached, (S, D·numel): the output-space gradient of e (up to a constant)
    grad: Tensor


def pair_errors(
    inputs: ForwardLossInputs, samples: Tensor, first: Tensor, draw_of: Tensor, cfg: Any, *, view: str
) -> SampleErrors:
    """Evaluate ``samples`` (positions into the micro-batch) at D shared draws each: draw j of sample i comes from
    ``inputs.generators[first[draw_of[i]]]``. ``cfg`` carries logit_mean / logit_std / timestep_range / stratified /
    timesteps and ``draws_per_pair`` (dpo) or ``draws_per_group`` (dgpo)."""
    count = getattr(cfg, "draws_per_pair", None) or cfg.draws_per_group
    x0 = inputs.x0.float()
    shape = tuple(x0.shape[1:])
    made = [
        draws(
            inputs.generators[i],
            shape,
            count=count,
            timestep_index=inputs.timestep_index,
            timesteps=cfg.timesteps,
            mean=cfg.logit_mean,
            std=cfg.logit_std,
            time_range=cfg.timestep_range,
            stratified=cfg.stratified,
        )
        for i in first.tolist()
    ]
    draw_of = draw_of.to(x0.device)
    n = samples.numel()
    # rows are draw-major: row d·n + i is sample i at its d-th draw
    t = torch.stack([m[0] for m in made]).to(x0.device)[draw_of].T.reshape(-1)
    noise = torch.stack([m[1] for m in made]).to(x0.device)[draw_of].transpose(0, 1).reshape(n * count, *shape)
    clean = x0[samples].repeat(count, *([1] * len(shape)))
    rows = samples.repeat(count)
    expand = t.view(-1, *([1] * len(shape)))
    x_t = (1.0 - expand) * clean + expand * noise
    target = noise - clean
    v_theta = inputs.velocity("current", x_t, t, rows)
    with torch.no_grad():
        v_ref = inputs.velocity(view, x_t, t, rows)
    e_theta = flow_matching_error(v_theta, target).view(count, n).mean(dim=0)
    e_ref = flow_matching_error(v_ref, target).view(count, n).mean(dim=0)
    with torch.no_grad():
        norms = v_theta.detach().float().flatten(1).norm(dim=1) / v_ref.float().flatten(1).norm(dim=1).clamp_min(1e-12)
        grad = (v_theta.detach().float() - target).reshape(count, n, -1).transpose(0, 1).reshape(n, -1)
    return SampleErrors(e_theta, e_ref, norms.view(count, n).mean(dim=0), grad)


def safeguard_scale(grad_w: Tensor, grad_l: Tensor, mu: float) -> Tensor:
    """Diffusion-SDPO's loser-gradient scale per pair (docs/math.md#dpo-safeguards): λ = min(1, μ·‖g_w‖² /
    <g_w, g_l>) where <g_w, g_l> > 0, else 1, so that the step -(∇e_w - λ∇e_l) does not raise e_w to first order
    (taken in output space: g = v_θ - u of each sample's draws)."""
    dot = (grad_w * grad_l).sum(dim=1)
    sq = grad_w.pow(2).sum(dim=1)
    safe = torch.where(dot > 0, mu * sq / dot.clamp_min(1e-30), torch.ones_like(dot))
    return safe.clamp(max=1.0)


class DPOLoss:
    """Diffusion-DPO on pairs; evaluates the current policy (with gradients) and the reference (without)."""

    def __init__(self, config: DPOLossConfig) -> None:
        self.config = config
        self.reference = ReferencePolicy(
            config.reference,
            sync_every=config.reference_sync_every,
            ema_decay=config.reference_ema_decay,
            loss_name="dpo",
        )
        self.requirements = LossRequirements(
            inputs="forward",
            views=frozenset({"current", self.reference.view}),
            timesteps=config.timesteps,
            batch_unit="group",
            rollout_view=self.reference.rollout_view,  # type: ignore[arg-type]
        )

    def setup(self, model: Any) -> None:
        """The reference: under full fine-tuning a frozen copy kept now, before a checkpoint is loaded (a no-op
        with LoRA); a moving reference's adapter (:mod:`omni_rl_dpo.reference`)."""
        self.reference.setup(model)

    def before_update(self, model: Any, step: int) -> None:
        self.reference.before_update(model, step)

    def after_update(self, model: Any, update_index: int) -> None:
        self.reference.after_update(model)

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        """The pairs of the whole batch (see :mod:`omni_rl_dpo.pairing`); advantages are not used."""
        if self.config.pairing == "offline":
            return pairing.pair_in_order(group_ids)
        if self.config.pairing == "all_pairs":
            return pairing.pair_all_by_reward(rewards, group_ids, min_spread=self.config.min_reward_spread)
        return pairing.pair_by_reward(rewards, group_ids, min_spread=self.config.min_reward_spread)

    def __call__(self, inputs: ForwardLossInputs) -> LossOutput:
        cfg = self.config
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
        if cfg.pairing == "all_pairs":
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

        # D = draws_per_pair (t, ε) per pair, or per group with all_pairs: drawn from the generator of ``first``
        # (the pair's chosen sample; the group's first member), shared by every sample of the pair or group.
        errors = pair_errors(inputs, samples, first, draw_of, cfg, view=self.reference.view)
        win, lose = chosen_at.to(errors.e_theta.device), rejected_at.to(errors.e_theta.device)
        e_theta_l = errors.e_theta[lose]
        loser_scale = None
        if cfg.loser_safeguard > 0:
            loser_scale = safeguard_scale(errors.grad[win], errors.grad[lose], cfg.loser_safeguard)
            e_theta_l = e_theta_l.detach() + loser_scale * (e_theta_l - e_theta_l.detach())
        terms = dpo_terms(errors.e_theta[win], e_theta_l, errors.e_ref[win], errors.e_ref[lose], cfg.beta)
        per_pair = terms.loss
        if cfg.sft_weight > 0:
            per_pair = per_pair + cfg.sft_weight * errors.e_theta[win]

        # Sum over pairs x (N / P) / B: see pairing's docstring for why this is the exact mean over the batch.
        scale = extras[pairing.WEIGHT][samples[chosen_at]].float().to(errors.e_theta.device) / batch
        loss = (scale * per_pair).sum()
        with torch.no_grad():
            e_theta, e_ref = errors.e_theta, errors.e_ref
            metrics: dict[str, Any] = {
                "implicit_acc": float((scale * (terms.inside > 0).float()).sum()),
                "reward_margin": float((scale * terms.inside).sum()),
                "reward_chosen": float((scale * terms.reward_chosen).sum()),
                "reward_rejected": float((scale * terms.reward_rejected).sum()),
                "policy_mse": float((scale * 0.5 * (e_theta[win] + e_theta[lose])).sum()),
                "reference_mse": float((scale * 0.5 * (e_ref[win] + e_ref[lose])).sum()),
                "chosen_error_delta": float((scale * (e_theta[win] - e_ref[win])).sum()),
                "rejected_error_delta": float((scale * (e_theta[lose] - e_ref[lose])).sum()),
                "velocity_norm_ratio": float((scale * 0.5 * (errors.norm_ratio[win] + errors.norm_ratio[lose])).sum()),
                **counts,
            }
            if cfg.sft_weight > 0:
                metrics["sft_mse"] = float((scale * e_theta[win]).sum())
            if loser_scale is not None:
                metrics["loser_scale"] = float((scale * loser_scale).sum())
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
        names = [*METRICS, *(["sft_mse"] if self.config.sft_weight > 0 else [])]
        names += ["loser_scale"] if self.config.loser_safeguard > 0 else []
        return zero_loss(inputs, self.reference.view, names, counts)


def zero_loss(inputs: ForwardLossInputs, view: str, names: list[str], counts: dict[str, float]) -> LossOutput:
    """A zero loss that still reaches every trained weight: one current-policy forward of one sample times 0.

    A micro-batch of skipped groups must still backpropagate (zero) gradients, so that workers summing
    gradients see every parameter. When no micro-batch of an optimizer step on any worker has a pair, the
    summed gradient is exactly zero and the update skips that optimizer step (``no_signal_steps``), so AdamW's
    momentum and weight decay do not move the weights without a preference. It also runs the reference
    forward a micro-batch with pairs runs: with the model sharded by FSDP2 every forward is a collective, so
    every worker must run the same views in the same order (its reference ``view``: frozen, synced or EMA).
    """
    first = torch.zeros(1, dtype=torch.long, device=inputs.x0.device)
    x = inputs.x0[:1].float()
    t = torch.full((1,), 0.5, device=x.device)
    v = inputs.velocity("current", x, t, first)
    with torch.no_grad():
        inputs.velocity(view, x, t, first)
    return LossOutput(loss=0.0 * v.sum(), metrics={**dict.fromkeys(names, 0.0), **counts})
