"""The pretrained shapes edit model: a tiny ``QwenImageEditPipeline`` directory shipped as package data.

Load it by path through the ``qwen_image_edit`` model plugin, ``[model] options.path =
"package:omni_rl_shapes_edit:pretrained_qwen_image_edit"`` (docs/examples/shapes_edit.toml), or find it with
``omni_rl_shapes.pretrained_path("qwen_image_edit")``. It is a package of its own so that each package stays under
20 MB (omni-rl-shapes ships the SD3 and Qwen-Image models). How it was made is in its
``omni_rl_shapes_pretrain.json`` (each stage's command, seeds, timings and evaluations; ``python -m
omni_rl_shapes.pretraining.edit`` is the command).

Data only: its entry point (``hooks``) registers no component, and it imports nothing.
"""

#: the pipeline directory inside this package
MODEL_DIR = "pretrained_qwen_image_edit"
