"""How a FluxPipeline is found and loaded: :class:`omni_rl_pipelines.loading.PipelineKind` (the checks every
diffusers model adapter shares, ending in a ConfigError naming the option) for FLUX.1 and FLUX.1-Kontext."""

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

#: FLUX.1-Kontext (``FluxKontextPipeline``): FLUX.1's components (its optional IP-Adapter image encoder is not read)
FLUX_KONTEXT = PipelineKind(
    label="FLUX.1-Kontext",
    pipeline_class="FluxKontextPipeline",
    class_names=frozenset({"FluxKontextPipeline"}),
    required=FLUX.required,
    model_name="flux_kontext",
    example="black-forest-labs/FLUX.1-Kontext-dev",
    gated=True,
    tiny_builder="omni_rl_flux.kontext_tiny:build_tiny_kontext_pipeline",
)
