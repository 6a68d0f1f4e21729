"""How a FluxPipeline is found and loaded: :class:`omni_rl_pipelines.loading.PipelineKind` (the checks every
diffusers model adapter shares, ending in a ConfigError naming the option) for FLUX.1."""

from __future__ import annotations

from omni_rl_pipelines.loading import PipelineKind

FLUX = PipelineKind(
    label="FLUX",
    pipeline_class="FluxPipeline",
    class_names=frozenset({"FluxPipeline", "FluxImg2ImgPipeline", "FluxInpaintPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "text_encoder_2", "tokenizer", "tokenizer_2"),
    model_name="flux",
    example="black-forest-labs/FLUX.1-dev",
    gated=True,
    tiny_builder="omni_rl_flux.tiny:build_tiny_flux_pipeline",
)
