"""The reference policy of the DPO-family losses (``dpo``, ``dgpo``; docs/math.md#dpo-reference).

- ``"frozen"``: the model with its LoRA off (the ``reference`` view): Diffusion-DPO's pretrained reference.
- ``"synced"``: a second LoRA adapter, ``"old"``, that the rollout samples from (``rollout_view = "old"``) and
  that is set to the trained weights after every ``reference_sync_every``-th training step's update, as
  flow_grpo's OnlineDPO keeps its "ref" adapter: both images of a fresh pair then come from the reference, and
  the DPO margin measures how the learner moved away from it since the last sync.
- ``"ema"``: a second adapter, ``"ema"``, with ref ← d·ref + (1 − d)·θ after every training step's update
  (DGPO's fast EMA reference); the rollout samples from the trained policy.

The core's checkpoint holds every frozen LoRA weight, so a resumed run keeps the reference adapter; the sync
period is keyed on the trainer's step (given to ``before_update``), so a resume syncs when the uninterrupted run
would have. Before the first optimizer step the adapters equal the trained one, which starts at zero (the
reference is then the base model, as with ``"frozen"``).
"""

from __future__ import annotations

from typing import Any

from omni_rl.errors import RuntimeFailure

#: the adapter the optimizer trains (the model plugins' name for it)
TRAINED_ADAPTER = "default"
#: the view (and adapter) name of each moving reference: the core knows the views "old" and "ema"
VIEW_OF = {"frozen": "reference", "synced": "old", "ema": "ema"}
_ADAPTER_METHODS = ("add_adapter", "use_adapter", "blend_adapter")


class ReferencePolicy:
    """The reference's view, its rollout view, and the adapter's lifecycle (the loss forwards its hooks here)."""

    def __init__(self, kind: str, *, sync_every: int = 1, ema_decay: float = 0.3, loss_name: str = "dpo") -> None:
        self.kind = kind
        self.view = VIEW_OF[kind]
        self.sync_every = sync_every
        self.ema_decay = ema_decay
        self.loss_name = loss_name
        #: the training step whose update is running (from ``before_update``); None outside the update engine
        self._step: int | None = None

    @property
    def rollout_view(self) -> str:
        """``"old"`` when the rollout samples from the synced reference, else ``"current"``."""
        return "old" if self.kind == "synced" else "current"

    def setup(self, model: Any) -> None:
        """Frozen: keep a reference copy under full fine-tuning. Moving: add the adapter as a copy of the trained
        one (before a checkpoint is loaded, which then restores its weights)."""
        if self.kind == "frozen":
            keep = getattr(model, "keep_reference_copy", None)
            if keep is not None:
                keep()
            return
        missing = [name for name in _ADAPTER_METHODS if not callable(getattr(model, name, None))]
        if missing:
            raise RuntimeFailure(
                f"{self.loss_name}: reference = {self.kind!r} keeps the reference as a second LoRA adapter, but the "
                f"model {type(model).__name__} has no {', '.join(missing)} @ $.loss.options.reference",
                hint='use a model plugin with named LoRA adapters and lora_rank > 0, or reference = "frozen"',
            )
        model.add_adapter(self.view, copy_from=TRAINED_ADAPTER)

    def before_update(self, model: Any, step: int) -> None:
        self._step = step

    def after_update(self, model: Any) -> None:
        """End of a training step's update: sync (every ``sync_every`` steps) or blend the moving reference."""
        if self.kind == "ema":
            model.blend_adapter(self.view, TRAINED_ADAPTER, decay=self.ema_decay)
        elif self.kind == "synced" and (self._step is None or self._step % self.sync_every == 0):
            model.blend_adapter(self.view, TRAINED_ADAPTER, decay=0.0)
