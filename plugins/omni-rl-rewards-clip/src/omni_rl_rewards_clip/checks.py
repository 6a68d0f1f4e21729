"""Checks across config sections (``RewardSpec.check``): what a reward's options alone cannot validate.

A reward that compares each output with its source image cannot score a text-only run: without this check the
run would load the model, sample a whole step and only then fail in the reward. ``omni-rl check`` and ``run``
refuse it before anything starts, naming the section.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the rewards of this plugin that read the condition images (``reads_conditions = True``)
READS_CONDITIONS: tuple[str, ...] = ("image_similarity",)


def takes_conditions(model: Any) -> bool:
    """Whether the model section's spec declares condition images (``ModelSpec.condition_images``'s most > 0)."""
    return tuple(getattr(model.spec, "condition_images", (0, 0)))[1] > 0


def source_reward_check(components: Mapping[str, Any]) -> list[str]:
    """``RewardSpec.check`` of ``image_similarity``: refused with a model that takes no condition images."""
    model = components.get("model")
    if model is None or takes_conditions(model):
        return []
    return [
        f"invalid value: reward {section.name!r} compares each output with its source image, but the {model.name!r} "
        "model takes no condition images (a text-only run has no source to compare with); use an editing or "
        "image-to-video model on prompt rows with an `image` or `images` field (docs/editing.md), or remove this "
        f"reward @ {section.path}.name"
        for key, section in components.items()
        if key.startswith(("reward[", "eval_reward[")) and section.name in READS_CONDITIONS
    ]
