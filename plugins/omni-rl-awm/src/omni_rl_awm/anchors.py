"""The two policies AWM keeps beside the trained one, as named LoRA adapters on the same model (docs/math.md#awm-loss).

- ``"old"``: the policy that sampled this step's rollout, for the ratio ρ = exp(log p_θ − log p_old). It is
  refreshed to the trained weights at the start of every training step's update, so after the first optimizer
  step of a step (mini-batches, epochs) ρ compares against the rollout policy with the same t and ε. Until
  that first optimizer step the old policy *is* the current one: the loss then takes log p_old from the
  current forward (detached) instead of a second forward, which is exactly what the reference trainer does
  for its first gradient-accumulation group, and makes ρ = 1 by construction.
- ``"ema"`` (only when ``ema_coef > 0``): the anchor of the β_ema·mean (v_θ − v_ema)² term,
  ema ← d·ema + (1 − d)·θ once per training step with d = ema_decay, or min(ema_decay, ramp · completed steps)
  for the "linear" schedule. The reference blends once per outer epoch, after its update, with its optimizer
  step count; its configs take one optimizer step per epoch, so the count is the number of completed training
  steps. Blending at the start of step s (weights unchanged since the end of step s − 1's update) with
  s − 1 completed steps is the same update, and keying it on the trainer's step keeps the schedule right
  after a resume.

The core's checkpoint holds the EMA adapter's weights (every frozen LoRA weight) and :meth:`PolicyAnchors.
checkpoint_state` (the step of the last EMA blend), so a resumed run goes on blending exactly as the
uninterrupted one. A checkpoint of an older version has neither: the first update of the process then copies
the trained weights into the anchor, so the resumed run restarts it from the resumed policy.
"""

from __future__ import annotations

from typing import Any

from omni_rl.errors import RuntimeFailure
from omni_rl_awm.config import AWMLossConfig

#: the adapter the optimizer trains (the model plugins' name for it)
TRAINED_ADAPTER = "default"
OLD_ADAPTER = "old"
EMA_ADAPTER = "ema"


def ema_decay(config: AWMLossConfig, completed_steps: int) -> float:
    """d of the EMA blend after ``completed_steps`` training steps."""
    if config.ema_decay_schedule == "constant":
        return config.ema_decay
    return min(config.ema_decay, config.ema_decay_ramp * max(completed_steps, 0))


def _require_named_adapters(model: Any) -> None:
    missing = [name for name in ("add_adapter", "blend_adapter", "use_adapter") if not hasattr(model, name)]
    if missing:
        raise RuntimeFailure(
            f"the awm loss keeps its old (and EMA) policy as named LoRA adapters, but the model "
            f"{type(model).__name__} has no {', '.join(missing)}",
            hint="use a model plugin with named LoRA adapters (e.g. sd3 with lora_rank > 0)",
        )


class PolicyAnchors:
    """Creates and refreshes the "old" and "ema" adapters; tells the loss when "old" equals the current policy."""

    def __init__(self, config: AWMLossConfig) -> None:
        self.config = config
        self.use_ema = config.ema_coef > 0
        #: True between the refresh of "old" and the next optimizer step; False when no refresh was seen
        #: (e.g. the loss called outside the update engine), so the "old" view is then evaluated
        self.old_is_current = False
        #: the training step whose update last refreshed "ema" (None: not yet in this process)
        self._ema_step: int | None = None

    def setup(self, model: Any) -> None:
        """Add the frozen adapters as copies of the trained one (once, after the model is built)."""
        _require_named_adapters(model)
        model.add_adapter(OLD_ADAPTER, copy_from=TRAINED_ADAPTER)
        if self.use_ema:
            model.add_adapter(EMA_ADAPTER, copy_from=TRAINED_ADAPTER)

    def before_update(self, model: Any, step: int) -> None:
        """Start of training step ``step``'s update: old ← θ; ema ← d·ema + (1 − d)·θ (first time: ema ← θ)."""
        model.blend_adapter(OLD_ADAPTER, TRAINED_ADAPTER, decay=0.0)
        self.old_is_current = True
        if not self.use_ema:
            return
        if self._ema_step is None:
            model.blend_adapter(EMA_ADAPTER, TRAINED_ADAPTER, decay=0.0)
        elif step > self._ema_step:
            model.blend_adapter(EMA_ADAPTER, TRAINED_ADAPTER, decay=ema_decay(self.config, step - 1))
        self._ema_step = step

    def after_optimizer_step(self, model: Any, update_index: int) -> None:
        """The trained weights moved: from now on "old" (the rollout policy) differs from the current one."""
        self.old_is_current = False

    def checkpoint_state(self) -> dict[str, Any]:
        """What a resume needs besides the adapters' weights: the step of the last EMA blend (JSON)."""
        return {"ema_step": self._ema_step}

    def load_checkpoint_state(self, state: dict[str, Any]) -> None:
        step = state.get("ema_step")
        self._ema_step = None if step is None else int(step)
