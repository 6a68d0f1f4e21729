"""``diffusion_nft``: the loss component, which owns the old policy's lifecycle as well as the objective.

DiffusionNFT trains on clean rollouts only: the rollout (sampled with the *old* policy, any sampler, no
log-probs) keeps x₀; the update re-noises it at timesteps of the sampling schedule and compares the current
policy with the old one there (:mod:`omni_rl_diffusion_nft.objective`). The old policy is a second LoRA adapter
on the same transformer, ``"old"``:

- :meth:`DiffusionNFTLoss.setup` adds it as a copy of the trained adapter (the reference copies too);
- the rollout samples with it (``requirements.rollout_view = "old"``), the update reads it as the ``old`` view;
- after the step's update (``refresh = "update"``, the reference's once-per-sampling-round refresh) or after
  every optimizer step (``refresh = "optimizer_step"``) it moves toward the trained one:
  old ← d·old + (1 − d)·θ with d from :mod:`omni_rl_diffusion_nft.decay`;
- checkpoints hold its weights (the core saves every frozen LoRA weight) and the optimizer-step count d
  depends on (the update engine's), so a resumed run refreshes it exactly as the uninterrupted one.

The reward probabilities r are computed once on the driver from the whole batch's advantages (:meth:`prepare`)
and reach the loss as ``extras["reward_prob"]``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from omni_rl.batch import ForwardLossInputs, LossOutput
from omni_rl.errors import RuntimeFailure
from omni_rl.protocols import LossRequirements
from omni_rl_diffusion_nft.config import DiffusionNFTLossConfig
from omni_rl_diffusion_nft.decay import old_decay
from omni_rl_diffusion_nft.objective import NFTObjective, nft_objective
from omni_rl_diffusion_nft.probability import reward_probability
from omni_rl_diffusion_nft.timesteps import draw_noise, schedule_timesteps, timestep_indices

#: the trained adapter's name (omni-rl-sd3's) and the old policy's
TRAINED_ADAPTER = "default"
OLD_ADAPTER = "old"
#: the per-sample field :meth:`DiffusionNFTLoss.prepare` adds
REWARD_PROB = "reward_prob"
_ADAPTER_METHODS = ("add_adapter", "use_adapter", "blend_adapter")


class DiffusionNFTLoss:
    """DiffusionNFT's loss: needs the current and old views (and the reference when ``kl_coef > 0``)."""

    def __init__(self, config: DiffusionNFTLossConfig) -> None:
        self.config = config
        views = {"current", "old"} | ({"reference"} if config.kl_coef > 0 else set())
        self.requirements = LossRequirements(
            inputs="forward",
            views=frozenset(views),
            timesteps=config.train_timesteps,
            rollout_view="old",
        )
        #: the training timesteps per latent shape (one image size per run, so computed once)
        self._timesteps: dict[tuple[int, ...], Tensor] = {}

    # -- the old policy ------------------------------------------------------------------------------------

    def setup(self, model: Any) -> None:
        """Add the ``"old"`` adapter as a copy of the trained one, before anything samples or trains."""
        missing = [name for name in _ADAPTER_METHODS if not callable(getattr(model, name, None))]
        if missing:
            raise RuntimeFailure(
                f"diffusion_nft keeps its old policy as a second LoRA adapter, but the model "
                f"{type(model).__name__} has no {', '.join(missing)}",
                hint="use a model plugin with named LoRA adapters (e.g. sd3 with lora_rank > 0)",
            )
        model.add_adapter(OLD_ADAPTER, copy_from=TRAINED_ADAPTER)

    def refresh_old(self, model: Any, update_index: int) -> float:
        """old ← d·old + (1 − d)·θ with d = d(update_index); returns d."""
        decay = old_decay(self.config.old_decay, update_index)
        model.blend_adapter(OLD_ADAPTER, TRAINED_ADAPTER, decay=decay)
        return decay

    def after_update(self, model: Any, update_index: int) -> None:
        """Once per training step, after all its optimizer steps (``refresh = "update"``, the reference)."""
        if self.config.refresh == "update":
            self.refresh_old(model, update_index)

    def after_optimizer_step(self, model: Any, update_index: int) -> None:
        """After every optimizer step (``refresh = "optimizer_step"``)."""
        if self.config.refresh == "optimizer_step":
            self.refresh_old(model, update_index)

    # -- the objective -------------------------------------------------------------------------------------

    def prepare(self, rewards: Tensor, advantages: Tensor, group_ids: Tensor) -> dict[str, Tensor]:
        """r per sample from the whole batch's advantages (the update slices it to each micro-batch)."""
        return {REWARD_PROB: reward_probability(advantages, self.config.adv_clip_max, self.config.reward_mode)}

    def __call__(self, inputs: ForwardLossInputs) -> LossOutput:
        cfg = self.config
        x0 = inputs.x0.to(torch.float32)
        device = x0.device
        grid = self._schedule(inputs, tuple(x0.shape[1:])).to(device)
        picks = timestep_indices(inputs.epoch_generators, inputs.generators, cfg.num_steps, inputs.timestep_index)
        t = grid[picks.to(device)]
        noise = draw_noise(inputs.generators, x0.shape[1:]).to(device)
        t_b = t.reshape(-1, *([1] * (x0.ndim - 1)))
        x_t = (1.0 - t_b) * x0 + t_b * noise

        v_old = inputs.velocity("old", x_t, t)
        v_theta = inputs.velocity("current", x_t, t)
        v_ref = inputs.velocity("reference", x_t, t) if cfg.kl_coef > 0 else None
        reward_prob = inputs.extras.get(REWARD_PROB)
        if reward_prob is None:  # called without prepare (a notebook): same map on the micro-batch's advantages
            reward_prob = reward_probability(inputs.advantages, cfg.adv_clip_max, cfg.reward_mode)
        out = nft_objective(
            x0=x0,
            x_t=x_t,
            t=t,
            v_theta=v_theta,
            v_old=v_old,
            reward_prob=reward_prob.to(device),
            beta=cfg.beta,
            adv_clip_max=cfg.adv_clip_max,
            v_ref=v_ref,
            kl_coef=cfg.kl_coef,
        )
        return LossOutput(loss=out.loss, metrics=self._metrics(out, t, reward_prob, v_theta, v_old, v_ref))

    def _schedule(self, inputs: ForwardLossInputs, latent_shape: tuple[int, ...]) -> Tensor:
        """The ``num_steps`` training timesteps of the model's schedule at this image size (cached)."""
        if latent_shape not in self._timesteps:
            if inputs.sigma_schedule is None:
                raise RuntimeFailure(
                    "diffusion_nft trains on the sampling schedule's timesteps, but its inputs carry no sigma_schedule",
                    hint="run it through omni-rl's forward update, or pass ForwardLossInputs(sigma_schedule=...)",
                )
            sigmas = inputs.sigma_schedule(self.config.num_steps)
            self._timesteps[latent_shape] = schedule_timesteps(sigmas.detach().cpu(), self.config.num_steps)
        return self._timesteps[latent_shape]

    @staticmethod
    def _metrics(
        out: NFTObjective, t: Tensor, reward_prob: Tensor, v_theta: Tensor, v_old: Tensor, v_ref: Tensor | None
    ) -> dict[str, float]:
        """Plain floats (the trainer prefixes ``actor/``), named after the reference's logged terms:
        ``old_deviation`` is its ``old_deviate`` mean (v_θ − v_old)², ``kl`` its ``kl_div`` and ``old_kl`` its
        ``old_kl_div`` mean (v_old − v_ref)²."""
        with torch.no_grad():
            v_theta, v_old = v_theta.detach().float(), v_old.detach().float()
            metrics = {
                "policy_loss": float(out.policy_loss.detach()),
                "positive_loss": float(out.positive_loss.detach().mean()),
                "negative_loss": float(out.negative_loss.detach().mean()),
                "old_deviation": float(((v_theta - v_old) ** 2).mean()),
                "reward_prob_mean": float(reward_prob.float().mean()),
                "timestep_mean": float(t.float().mean()),
            }
            if out.kl is not None and v_ref is not None:
                metrics["kl"] = float(out.kl.detach())
                metrics["old_kl"] = float(((v_old - v_ref.detach().float()) ** 2).mean())
        return metrics
