"""Z-Image model adapter for omni-rl.

``hooks`` registers the ``z_image`` model; ``model.ZImageModel`` is the adapter; ``tiny.build_tiny_z_image_pipeline``
writes small random Z-Image pipelines (base or Turbo schedule) for tests. Nothing heavy is imported here.
"""
