"""Moved to :mod:`omni_rl_pipelines.testing` (omni-rl-pipelines): this path warns, and goes in omni-rl 0.2."""

from omni_rl_sd3._moved import alias_module

alias_module(__name__)
