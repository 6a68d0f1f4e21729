"""Options of the ``flow_dppo`` loss.

Stdlib and attrs only: ``hooks.py`` hands this class to the registry (which validates ``[loss] options`` against
it) without importing torch.
"""

from __future__ import annotations

import attrs

from omni_rl.validators import non_negative_finite, positive_finite


@attrs.frozen(kw_only=True)
class FlowDPPOLossConfig:
    """Options of ``flow_dppo``: the unclipped ratio objective with Flow-DPPO's KL trust-region mask
    (docs/math.md#flow-dppo-loss).

    There is no ratio clip and no advantage clip: the mask is the trust region, and docs/math.md#flow-dppo-loss (like
    the UniRL reference) uses the advantages as they are.
    """

    #: a sample's step is dropped when KL(new, old) >= this and the update moves it further away; 1e-5 is UniRL's
    #: and VeRL-Omni's default (Flow-Factory's is 1e-6; docs/math.md#flow-dppo-loss)
    kl_mask_threshold: float = attrs.field(default=1e-5, converter=float, validator=positive_finite)
    #: β of the KL-to-reference term (flow_grpo's); > 0 makes the update also evaluate the reference (adapters off)
    kl_coef: float = attrs.field(default=0.0, converter=float, validator=non_negative_finite)
