"""``omni-rl check``'s warning for Z-Image's known-fragile setting: the distilled Z-Image-Turbo trained without KL.

Peers report that RL on Turbo without a KL term blurs the images after a few thousand steps (Flow-Factory #225),
and that its LoRA's on-policy ratio sits at exactly 1 (#157), so the clipped objective alone does not hold the
policy. The setting is legal, so it is not a config problem: the core's component checks
(``ComponentSpec.check``) have no warning channel (what they return are errors that stop the run), so the check
emits a Python ``UserWarning`` (which ``omni-rl check`` and ``run`` print on stderr) and returns no problem.

Which checkpoint is Turbo: ``[model] options.distilled`` when set, else a path naming "turbo"
(Tongyi-MAI/Z-Image-Turbo and its copies), else the tiny pipeline's marker (``variant = "turbo"``). The published
scheduler configs cannot tell (both use a fixed shift). Torch-free: it runs at config time.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from omni_rl_pipelines.tiny import TINY_MARKER

KL_PATH = "$.loss.options.kl_coef"


class ZImageTurboWarning(UserWarning):
    """Z-Image-Turbo trained without KL (a legal but fragile setting)."""


def is_distilled(options: Any) -> bool:
    """Whether ``[model] options`` name the distilled Turbo checkpoint (see the module docstring)."""
    if options.distilled is not None:
        return bool(options.distilled)
    path = str(options.path)
    if "turbo" in path.lower():
        return True
    marker = Path(path).expanduser() / TINY_MARKER
    try:
        return json.loads(marker.read_text(encoding="utf-8")).get("variant") == "turbo"
    except (OSError, ValueError, AttributeError):
        return False


def turbo_without_kl(components: Mapping[str, Any]) -> str | None:
    """The warning line when the model is Turbo and the loss has a ``kl_coef`` of 0, else None."""
    model, loss = components.get("model"), components.get("loss")
    if model is None or loss is None or not is_distilled(model.options):
        return None
    kl = getattr(loss.options, "kl_coef", None)
    if kl is None or float(kl) > 0:
        return None
    return (
        f"Z-Image-Turbo is a distilled few-step checkpoint, trained here without KL (kl_coef = {float(kl):g}): RL on "
        "it is reported to blur after a few thousand steps and its on-policy ratio to stay at 1 (Flow-Factory "
        "#225, #157); set kl_coef > 0 (e.g. 0.04) or train the base Z-Image @ " + KL_PATH
    )


def z_image_check(components: Mapping[str, Any]) -> Iterable[str]:
    """The ``z_image`` model's ``ComponentSpec.check``: warns (never fails) for Turbo without KL."""
    message = turbo_without_kl(components)
    if message is not None:
        warnings.warn(message, ZImageTurboWarning, stacklevel=2)
    return []
