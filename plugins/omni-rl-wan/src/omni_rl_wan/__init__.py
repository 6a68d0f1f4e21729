"""Wan2.1 / Wan2.2 text-to-video model adapter for omni-rl.

``hooks`` registers the ``wan`` model; ``model.WanModel`` is the adapter; ``tiny.build_tiny_wan_pipeline`` writes
small random WanPipeline directories (one transformer, or Wan2.2's two experts) for tests. Nothing heavy is
imported here.
"""
