"""How a Flux2KleinPipeline is found and loaded: :class:`omni_rl_pipelines.loading.PipelineKind` (the checks every
diffusers model adapter shares, ending in a ConfigError naming the option) for FLUX.2-klein."""

from __future__ import annotations

from omni_rl_pipelines.loading import PipelineKind

FLUX2_KLEIN = PipelineKind(
    label="FLUX.2-klein",
    pipeline_class="Flux2KleinPipeline",
    class_names=frozenset({"Flux2KleinPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    model_name="flux2_klein",
    example="black-forest-labs/FLUX.2-klein-base-4B",
    gated=False,
    tiny_builder="omni_rl_flux2.tiny:build_tiny_flux2_klein_pipeline",
)
