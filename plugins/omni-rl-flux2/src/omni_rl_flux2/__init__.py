"""FLUX.2-klein model adapter for omni-rl.

``hooks`` registers the ``flux2_klein`` model; ``model.Flux2KleinModel`` is the adapter;
``tiny.build_tiny_flux2_klein_pipeline`` writes small random Flux2KleinPipeline directories for tests. Nothing heavy
is imported here.
"""
