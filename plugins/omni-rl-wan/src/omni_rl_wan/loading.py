"""How a WanPipeline is found and loaded: :class:`omni_rl_pipelines.loading.PipelineKind` (the checks every
diffusers model adapter shares, ending in a ConfigError naming the option) for Wan."""

from __future__ import annotations

from omni_rl_pipelines.loading import PipelineKind

WAN = PipelineKind(
    label="Wan",
    pipeline_class="WanPipeline",
    # WanPipeline alone: the image-to-video pipelines are wan_i2v / wan_ti2v's (below); VACE's conditioning is not fed
    class_names=frozenset({"WanPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    model_name="wan",
    example="Wan-AI/Wan2.1-T2V-1.3B-Diffusers",
    tiny_builder="omni_rl_wan.tiny:build_tiny_wan_pipeline",
)

#: ``wan_i2v``: Wan2.1 I2V (with its CLIP image encoder) and Wan2.2 I2V-A14B (two experts), saved as
#: ``WanImageToVideoPipeline``. A ``WanPipeline`` directory is let through to the model's layout check, which says
#: which model runs it (``wan`` for a 16-channel text-to-video transformer, ``wan_ti2v`` for TI2V-5B)
WAN_I2V = PipelineKind(
    label="Wan image-to-video",
    pipeline_class="WanImageToVideoPipeline",
    class_names=frozenset({"WanImageToVideoPipeline", "WanPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    model_name="wan_i2v",
    example="Wan-AI/Wan2.1-I2V-14B-480P-Diffusers",
    tiny_builder="omni_rl_wan.i2v_tiny:build_tiny_wan_i2v_pipeline",
)

#: ``wan_ti2v``: Wan2.2 TI2V-5B, whose hub repository is a ``WanPipeline`` directory (``expand_timesteps``) that
#: ``WanImageToVideoPipeline`` loads as well; either class name is accepted, and it is loaded as the latter
WAN_TI2V = PipelineKind(
    label="Wan2.2 TI2V",
    pipeline_class="WanImageToVideoPipeline",
    class_names=frozenset({"WanPipeline", "WanImageToVideoPipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    model_name="wan_ti2v",
    example="Wan-AI/Wan2.2-TI2V-5B-Diffusers",
    tiny_builder="omni_rl_wan.i2v_tiny:build_tiny_wan_ti2v_pipeline",
)
