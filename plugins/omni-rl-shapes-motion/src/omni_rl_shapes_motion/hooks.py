"""The plugin's entry point: omni-rl-shapes-motion ships a model, not a component, so it implements no hook.

It is registered all the same so that ``omni-rl plugins`` lists it (with its version) next to the plugins that
load and score its model: ``wan`` (omni-rl-wan) and ``shapes_motion`` (omni-rl-shapes).
"""
