"""How a QwenImagePipeline is found and loaded: :class:`omni_rl_pipelines.loading.PipelineKind` (the checks every
diffusers model adapter shares, ending in a ConfigError naming the option) for Qwen-Image."""

from __future__ import annotations

from omni_rl_pipelines.loading import PipelineKind

QWEN_IMAGE = PipelineKind(
    label="Qwen-Image",
    pipeline_class="QwenImagePipeline",
    class_names=frozenset({"QwenImagePipeline", "QwenImageImg2ImgPipeline", "QwenImageInpaintPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    model_name="qwen_image",
    example="Qwen/Qwen-Image",
    tiny_builder="omni_rl_qwen_image.tiny:build_tiny_qwen_image_pipeline",
)
