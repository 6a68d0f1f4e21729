"""Options of the ``flux_kontext`` model (``[model] options``): every ``flux`` option, plus the condition's size.

Kept free of torch/diffusers imports, as :mod:`omni_rl_flux.config` is, so ``hooks.py`` hands the class to the
registry in milliseconds.

Why the condition size is an option: ``FluxKontextPipeline.__call__`` snaps every source image to one of 17
~1 MP resolutions (``_auto_resize``), 4096 condition tokens appended to each transformer call, four times the
1024 target tokens of a 512² training image; attention then costs about 25 times the target's own. Here the
condition keeps its size (floored to whole 2x2 latent patches, exactly what ``__call__`` does with
``_auto_resize=False``) and is only downscaled to at most ``condition_max_area`` pixels, aspect kept, with the
area rule ``__call__`` applies to its output size (``max_area``). ``condition_resize = "kontext_resolutions"``
restores the pipeline's own snap for runs that must see conditions exactly as the released model was sampled.
"""

from __future__ import annotations

from typing import Literal

import attrs

from omni_rl.validators import int_between, non_empty, with_hint
from omni_rl_flux.config import FluxConfig

#: FluxKontextPipeline's default ``max_area``: the ~1 MP the model was trained at
DEFAULT_CONDITION_MAX_AREA = 1024 * 1024
#: how the condition is sized: "area" (keep it, downscale to condition_max_area) or the pipeline's own snap
CONDITION_RESIZES: tuple[str, ...] = ("area", "kontext_resolutions")


@attrs.frozen(kw_only=True)
class FluxKontextConfig(FluxConfig):
    """How to load FLUX.1-Kontext and what to train: :class:`~omni_rl_flux.config.FluxConfig`'s options (guidance
    embedding, true CFG, LoRA, memory and speed options, prompt cache) with ``path`` a ``FluxKontextPipeline``
    directory, and how the source image is sized before it is VAE-encoded."""

    #: FluxKontextPipeline directory (with model_index.json) or hub id
    path: str = attrs.field(
        validator=with_hint(
            non_empty, "a FluxKontextPipeline directory or a hub id such as 'black-forest-labs/FLUX.1-Kontext-dev'"
        )
    )
    #: the largest condition, in pixels: a larger source is downscaled to it (aspect kept), a smaller one keeps its
    #: size; both are then floored to multiples of 2 x the VAE factor (16 px for the real model)
    condition_max_area: int = attrs.field(
        default=DEFAULT_CONDITION_MAX_AREA,
        validator=int_between(
            16 * 16, 4096 * 4096, hint="pixels of the VAE copy of the source, e.g. 262144 (512 x 512) or 1048576"
        ),
    )
    #: "area": the source's own size, downscaled to condition_max_area (the default); "kontext_resolutions": the
    #: pipeline's snap to the nearest of its 17 preferred ~1 MP sizes by aspect ratio (condition_max_area unused)
    condition_resize: Literal["area", "kontext_resolutions"] = attrs.field(
        default="area", validator=attrs.validators.in_(CONDITION_RESIZES)
    )
