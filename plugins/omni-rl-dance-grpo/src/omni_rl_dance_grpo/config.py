"""Options of ``dance_sde``, kept apart from the sampler so ``hooks.py`` imports no torch.

The window options (``window_size``, ``window_range``, ``window_mode``, ``timestep_fraction``, ``ode_solver``, ...)
come from omni-rl-flow-grpo's :class:`WindowConfig`, shared by every windowed sampler.
"""

from __future__ import annotations

import attrs
from omni_rl_flow_grpo.samplers.window import WindowConfig

from omni_rl.validators import non_negative_finite

#: η of DanceGRPO's reference scripts (``--eta 0.3`` in XueZeyue/DanceGRPO's FLUX and HunyuanVideo scripts)
DEFAULT_NOISE_LEVEL = 0.3


@attrs.frozen(kw_only=True)
class DanceSDEConfig(WindowConfig):
    """Options of ``dance_sde``: DanceGRPO's SDE with noise level η and the SDE window.

    ``noise_level = 0`` turns it into the Euler ODE step (no log-prob, nothing to train).
    """

    #: η: the step's std is η·sqrt(σ - σ'), a constant diffusion coefficient (flow_sde's a·sqrt(σ/(1 - σ)) with
    #: a = η·sqrt((1 - σ)/σ)); DanceGRPO's scripts use 0.3
    noise_level: float = attrs.field(default=DEFAULT_NOISE_LEVEL, converter=float, validator=non_negative_finite)
