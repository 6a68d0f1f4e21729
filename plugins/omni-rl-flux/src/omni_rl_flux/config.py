"""Options of the ``flux`` model (``[model] options``).

Kept free of torch/diffusers imports so ``hooks.py`` can hand this class to the registry (which validates the
config file against it) in milliseconds.

Two guidance knobs, one per FluxPipeline argument, so a recipe reads the same here as in diffusers:

* ``guidance`` (this section) is FluxPipeline's ``guidance_scale``: the value a guidance-distilled transformer
  (FLUX.1-dev, Krea: ``guidance_embeds = true``) takes as an embedding. One transformer call per step. Left out it
  is 3.5 on such a transformer; a transformer without guidance embeddings (schnell) refuses it.
* ``[rollout] cfg`` (the protocol's ``guidance_scale``) is FluxPipeline's ``true_cfg_scale``: above 1 it runs
  classic CFG with ``negative_prompt``, twice the transformer rows per step, identically in rollout and
  recompute. Keep it at 1 for guidance-distilled models unless you mean to pay for both.
"""

from __future__ import annotations

import attrs
from omni_rl_pipelines.options import JOINT_ATTENTION_TARGETS, MemoryOptions, PipelineOptions, lora_targets_option

from omni_rl.validators import int_between, non_empty, non_negative_finite, with_hint

#: LoRA targets, matched as dotted-name suffixes. Double-stream blocks: joint attention (image q/k/v/out and text
#: ``add_*`` q/k/v/out) and both streams' MLPs; single-stream blocks: q/k/v (``attn.to_*`` again), the MLP input
#: ``proj_mlp`` and the fused attention+MLP output ``proj_out``. This is the module set of the diffusers FLUX LoRA
#: recipes extended to the single blocks (38 of FLUX's 57 blocks). Note that peft's suffix match makes ``proj_out``
#: also hit the transformer's final output projection. AdaLN modulation linears (``norm1.linear``, ``norm.linear``)
#: are left out: they condition on the timestep and pooled text only.
DEFAULT_LORA_TARGETS: tuple[str, ...] = (
    *JOINT_ATTENTION_TARGETS,
    "ff.net.0.proj",
    "ff.net.2",
    "ff_context.net.0.proj",
    "ff_context.net.2",
    "proj_mlp",
    "proj_out",
)

#: FluxPipeline refuses more T5 tokens than this
MAX_SEQUENCE_LENGTH = 512
#: FluxPipeline's default ``guidance_scale``, used for guidance-distilled transformers when ``guidance`` is left out
DEFAULT_GUIDANCE = 3.5


@attrs.frozen(kw_only=True)
class FluxConfig(MemoryOptions, PipelineOptions):
    """How to load FLUX.1 and what to train.

    ``path`` is any diffusers ``FluxPipeline`` directory (FLUX.1-dev, FLUX.1-schnell, FLUX.1-Krea-dev and
    fine-tunes of that layout), or a hub id where a hub is reachable. LoRA is the default (the reference policy is
    the base model with adapters off); ``lora_rank = 0`` trains every transformer weight. The dtype, LoRA, memory
    (``offload_text_encoders``: CLIP and T5, 4.7B for the real model), speed and ``build_tiny_if_missing`` options
    are omni-rl-pipelines' (:class:`~omni_rl_pipelines.options.PipelineOptions`,
    :class:`~omni_rl_pipelines.options.MemoryOptions`).
    """

    #: FluxPipeline directory (with model_index.json) or hub id
    path: str = attrs.field(
        validator=with_hint(non_empty, "a FluxPipeline directory or a hub id such as 'black-forest-labs/FLUX.1-dev'")
    )
    #: distilled guidance embedded in the transformer (FluxPipeline's guidance_scale); left out = 3.5 when the
    #: transformer has guidance embeddings (dev, Krea), none otherwise (schnell, which refuses a value)
    guidance: float | None = attrs.field(
        default=None,
        validator=with_hint(
            attrs.validators.optional(non_negative_finite), "or left out: 3.5 on guidance-distilled models"
        ),
    )
    #: negative prompt of classic CFG (used only when [rollout] cfg > 1, FluxPipeline's true_cfg_scale)
    negative_prompt: str = ""
    #: T5 tokens per prompt (every prompt is padded to it, as the pipeline does): 512 for dev, 256 for schnell
    max_sequence_length: int = attrs.field(
        default=512, validator=int_between(1, MAX_SEQUENCE_LENGTH, hint="FluxPipeline's limit")
    )
    #: modules that get LoRA, matched as dotted-name suffixes (default: attention and MLPs of both block kinds)
    lora_target_modules: tuple[str, ...] = lora_targets_option(DEFAULT_LORA_TARGETS)
