"""Developer tooling that made the shipped pipelines: ``python -m omni_rl_shapes.pretraining.pretrain`` pretrains a
tiny SD3, Qwen-Image (omni-rl-qwen-image) or Wan (omni-rl-wan) pipeline on rendered shapes, ``python -m
omni_rl_shapes.pretraining.reproduce`` replays a shipped pipeline's record stage by stage.

Not needed to train on the benchmark or score it (the reward, the benchmark and the shipped pipelines are the
package's top level); ``pip install 'omni-rl-shapes[pretraining]'`` adds the model plugins every ``--arch`` needs.
:mod:`.pretrain` runs the stages, :mod:`.arch` holds what depends on the architecture, :mod:`.vae`,
:mod:`.flow_matching` and :mod:`.world` the VAE stage, the transformer's training loop and what it learns from, and
:mod:`.wan` the video model's pieces.
"""
