"""How a ZImagePipeline is found and loaded: :class:`omni_rl_pipelines.loading.PipelineKind` for Z-Image."""

from __future__ import annotations

from omni_rl_pipelines.loading import PipelineKind

Z_IMAGE = PipelineKind(
    label="Z-Image",
    pipeline_class="ZImagePipeline",
    class_names=frozenset({"ZImagePipeline", "ZImageImg2ImgPipeline", "ZImageInpaintPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    model_name="z_image",
    example="Tongyi-MAI/Z-Image",
    tiny_builder="omni_rl_z_image.tiny:build_tiny_z_image_pipeline",
)
