"""Checks across config sections (``RewardSpec.check``): a remote reward set to read the condition images (an
edit's sources) in a run whose model takes none.

``vlm_judge`` with ``with_source`` or an ``edit_*`` template, and ``http`` with ``send_conditions``, need each
sample's source: in a text-only run there is none, and the run would fail in the reward after its first step.
``omni-rl check`` and ``run`` refuse the config first, naming the option to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omni_rl_rewards_remote.templates import PRESETS


def _source_option(section: Any) -> str | None:
    """The option that makes this reward section read the condition images, or None."""
    options = section.options
    if section.name == "vlm_judge":
        if getattr(options, "with_source", False):
            return "with_source"
        preset = PRESETS.get(getattr(options, "template", ""))
        return "template" if preset is not None and preset.with_source else None
    if section.name == "http" and getattr(options, "send_conditions", False):
        return "send_conditions"
    return None


def source_reward_check(components: Mapping[str, Any]) -> list[str]:
    """``RewardSpec.check`` of ``vlm_judge`` and ``http``: sources asked for, a model that takes none."""
    model = components.get("model")
    if model is None or tuple(getattr(model.spec, "condition_images", (0, 0)))[1] > 0:
        return []
    problems = []
    for key, section in components.items():
        option = _source_option(section) if key.startswith(("reward[", "eval_reward[")) else None
        if option is not None:
            problems.append(
                f"invalid value: reward {section.name!r} is set to read each sample's source image ({option}), but the "
                f"{model.name!r} model takes no condition images (a text-only run has none); use an editing or "
                "image-to-video model on prompt rows with an `image` or `images` field (docs/editing.md), or turn "
                f"it off @ {section.path}.options.{option}"
            )
    return problems
