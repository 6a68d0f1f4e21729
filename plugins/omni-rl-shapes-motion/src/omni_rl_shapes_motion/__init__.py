"""The pretrained shapes-in-motion model: a tiny ``WanPipeline`` directory shipped as package data.

Load it by path through the ``wan`` model plugin, ``[model] options.path =
"package:omni_rl_shapes_motion:pretrained_wan_motion"`` (docs/examples/shapes_motion.toml), or find it with
``omni_rl_shapes.pretrained_path("wan")``. It is a package of its own, not part of omni-rl-shapes, so that each
package stays under 20 MB (omni-rl-shapes ships the SD3 and Qwen-Image models). How it was made, stage by stage,
is in its ``omni_rl_shapes_pretrain.json``; ``python -m omni_rl_shapes.pretraining.reproduce --arch wan`` replays it.

Data only: its entry point (``hooks``) registers no component, and it imports nothing.
"""

#: the pipeline directory inside this package
MODEL_DIR = "pretrained_wan_motion"
