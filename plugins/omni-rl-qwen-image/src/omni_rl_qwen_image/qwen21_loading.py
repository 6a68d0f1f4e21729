"""How a QwenImage21Pipeline is found and loaded, and its LoRA files: omni-rl-pipelines' :class:`PipelineKind` and
:class:`LoraAdapters` for Qwen-Image 2.1 (``QwenImage21Pipeline`` has Qwen-Image's LoRA loader mixin, so the files
are ``transformer.``-prefixed peft keys in ``pytorch_lora_weights.safetensors``, read by its
``load_lora_weights``)."""

from __future__ import annotations

from omni_rl_pipelines.loading import PipelineKind
from omni_rl_pipelines.lora import LoraAdapters

#: the pipeline's processor folder
PROCESSOR_FOLDER = "processor"
PROCESSOR_ENTRY = ["transformers", "Qwen3VLProcessor"]

QWEN_IMAGE21 = PipelineKind(
    label="Qwen-Image 2.1",
    pipeline_class="QwenImage21Pipeline",
    class_names=frozenset({"QwenImage21Pipeline"}),
    required=("transformer", "vae", "scheduler", "text_encoder", PROCESSOR_FOLDER),
    model_name="qwen_image21",
    example="Qwen/Qwen-Image-2.1",
    tiny_builder="omni_rl_qwen_image.qwen21_tiny:build_tiny_qwen_image21_pipeline",
)


class QwenImage21LoraAdapters(LoraAdapters):
    """Named LoRA adapters on a ``QwenImage21Transformer2DModel``; ``"default"`` is the one the optimizer trains."""

    pipeline_class = "QwenImage21Pipeline"
    model_label = "Qwen-Image 2.1"
    target_hint = (
        "lora_target_modules are dotted-name suffixes of transformer modules, e.g. 'attn.to_q', 'attn.to_out.0', "
        "'img_mlp.gate_layer', 'modulation.1'"
    )
