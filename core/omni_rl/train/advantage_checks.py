"""The advantage estimator as the trainer calls it: its failures named, its output checked.

An estimator is a plugin's code (often a third party's), and what it returns goes straight into every sample's
loss. Unchecked, a wrong output surfaces far from its cause: a NaN is blamed on the rewards and the learning rate
(and a short run skips every step and exits 0), N-1 values give a raw ``IndexError`` in the update, 2N values
train silently on the wrong samples, and an int64/None/str result gives a raw torch error. So every call is checked
here, as the rewards' scores are in :mod:`omni_rl.rewards.combined`: a raise and a wrong output both stop the run with a
:class:`~omni_rl.errors.RuntimeFailure` naming ``$.advantage``, the component and the plugin that provides it.
"""

from __future__ import annotations

from typing import Any

from omni_rl.errors import OmniRLError, RuntimeFailure, describe_exception


class CheckedEstimator:
    """Wraps a built advantage estimator; everything but ``__call__`` (``reward_aggregation()``, attributes) is
    the estimator's own."""

    def __init__(self, estimator: Any, component: Any = None) -> None:
        self.estimator = estimator
        name = getattr(component, "name", "") or type(estimator).__name__
        path = getattr(component, "path", "") or "$.advantage"
        plugin = getattr(component, "plugin", "")
        #: how messages name it: ``advantage 'grpo' ($.advantage, plugin omni-rl-flow-grpo 0.1.0)``
        self.label = f"advantage {name!r} ({path}" + (f", plugin {plugin})" if plugin else ")")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.estimator, name)

    def __call__(self, rewards: Any, group_ids: Any) -> Any:
        """``estimator(rewards, group_ids)`` as a float32 (N,) CPU tensor, or a RuntimeFailure saying what is
        wrong with it."""
        try:
            out = self.estimator(rewards, group_ids)
        except OmniRLError:
            raise  # the plugin's own readable error (a ConfigError, say): as it is
        except Exception as exc:
            raise RuntimeFailure(
                f"{self.label} raised {describe_exception(exc)}",
                hint="a bug in the advantage plugin: fix it or choose another [advantage] name "
                "(`omni-rl plugins --components` lists them); --debug shows the traceback",
            ) from exc
        return check_advantages(out, len(rewards), self.label)


def check_advantages(out: Any, count: int, label: str) -> Any:
    """``out`` as a float32 CPU tensor if it is ``count`` finite floating-point advantages, shape ``(count,)``
    (a tensor or a numpy array); otherwise a RuntimeFailure naming ``label`` and what it returned."""
    import numpy as np
    import torch

    hint = "an advantage estimator returns one finite float per sample, shape (N,), in the order of the rewards"
    if isinstance(out, np.ndarray):
        out = torch.from_numpy(out)
    if not isinstance(out, torch.Tensor):
        raise RuntimeFailure(f"{label} returned {type(out).__name__}, not a tensor of {count} advantages", hint=hint)
    if not out.is_floating_point():
        raise RuntimeFailure(f"{label} returned {out.dtype} advantages; they must be floating point", hint=hint)
    if tuple(out.shape) != (count,):
        raise RuntimeFailure(
            f"{label} returned advantages of shape {tuple(out.shape)} for {count} samples; expected ({count},)",
            hint=hint,
        )
    bad = ~torch.isfinite(out)
    if bool(bad.any()):
        first = int(bad.nonzero()[0])
        raise RuntimeFailure(
            f"{label} returned {int(bad.sum())} non-finite advantage(s) of {count} (the first, sample {first}, is "
            f"{float(out[first])}) from finite rewards",
            hint=f"{hint}; a reward spread of 0 in a group is the usual cause (divide by std + eps)",
        )
    return out.detach().to(device="cpu", dtype=torch.float32)
