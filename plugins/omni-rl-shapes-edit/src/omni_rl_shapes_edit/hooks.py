"""The plugin's entry point: omni-rl-shapes-edit ships a model, not a component, so it implements no hook.

It is registered all the same so that ``omni-rl plugins`` lists it (with its version) next to the plugins that
load and score its model: ``qwen_image_edit`` (omni-rl-qwen-image) and ``shapes_edit`` (omni-rl-shapes).
"""
