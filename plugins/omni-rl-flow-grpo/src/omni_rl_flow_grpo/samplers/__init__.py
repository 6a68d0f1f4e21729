"""One reverse step with log-prob: ``flow_sde``, ``cps`` and ``ode`` (docs/math.md#samplers).

Kept import-free so that importing :mod:`omni_rl_flow_grpo.samplers.window` (stdlib only) does not pull
in torch; import the sampler classes from their modules.
"""
