"""Which guidance a FLUX transformer gets: the distilled embedding (``guidance``) and classic CFG (``cfg``).

FLUX.1-dev and Krea were distilled to take the guidance scale as an input embedding, so they need one transformer
call per step; schnell has no guidance input at all. Classic CFG with a negative prompt (FluxPipeline's
``true_cfg_scale``) is separate and comes from the protocol's ``guidance_scale`` (``[rollout] cfg``): see
:mod:`omni_rl_flux.config`.
"""

from __future__ import annotations

from omni_rl.errors import ConfigError
from omni_rl_flux.config import DEFAULT_GUIDANCE


def distilled_guidance(option: float | None, *, guidance_embeds: bool, path: str) -> float | None:
    """The embedded guidance value the transformer gets at every call, or None for a transformer without
    guidance embeddings. A value set for such a transformer is refused rather than silently ignored (FluxPipeline
    ignores it): it would not do what the config says."""
    if guidance_embeds:
        return DEFAULT_GUIDANCE if option is None else float(option)
    if option is not None:
        raise ConfigError(
            f"{path} holds a FLUX transformer without guidance embeddings (e.g. FLUX.1-schnell), which cannot take "
            f"guidance = {option}",
            hint="leave [model] options.guidance out for this model; for classic CFG with a negative prompt set "
            "[rollout] cfg > 1 instead",
        )
    return None
