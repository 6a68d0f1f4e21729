"""Qwen-Image model adapter for omni-rl.

``hooks`` registers the ``qwen_image`` model; ``model.QwenImageModel`` is the adapter; ``tiny.
build_tiny_qwen_image_pipeline`` writes small random Qwen-Image pipelines for tests. Nothing heavy is imported here.
"""
