"""FLUX.1 model adapter for omni-rl.

``hooks`` registers the ``flux`` model; ``model.FluxModel`` is the adapter; ``tiny.build_tiny_flux_pipeline`` writes
small random FLUX pipelines for tests. Nothing heavy is imported here.
"""
