"""How a WanPipeline is found and loaded: :class:`omni_rl_pipelines.loading.PipelineKind` (the checks every
diffusers model adapter shares, ending in a ConfigError naming the option) for Wan."""

from __future__ import annotations

from omni_rl_pipelines.loading import PipelineKind

WAN = PipelineKind(
    label="Wan",
    pipeline_class="WanPipeline",
    # WanPipeline alone: the image-to-video and VACE pipelines condition on images this adapter does not feed
    class_names=frozenset({"WanPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    model_name="wan",
    example="Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
    tiny_builder="omni_rl_wan.tiny:build_tiny_wan_pipeline",
)
