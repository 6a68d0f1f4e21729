"""Qwen-Image model adapters for omni-rl.

``hooks`` registers the ``qwen_image``, ``qwen_image21`` and edit models; ``model.QwenImageModel`` and
``qwen21_model.QwenImage21Model`` are the text-to-image adapters; ``tiny.build_tiny_qwen_image_pipeline`` and
``qwen21_tiny.build_tiny_qwen_image21_pipeline`` write small random pipelines for tests. Nothing heavy is imported
here.
"""
