"""Generators keyed by integers (run seed, step, sample or group id, ...), for draws that must not depend on
batching or on which worker makes them.

The key goes through numpy's SeedSequence, which mixes it into well-separated 64-bit states, so neighbouring keys
(step 3 and step 4, group 7 and group 8) give independent streams; a distinct salt in the key keeps two streams
for the same ids apart.
"""

from __future__ import annotations

import numpy as np
import torch


def keyed_generator(*key: int) -> torch.Generator:
    """A CPU ``torch.Generator`` seeded from ``key`` alone (non-negative integers)."""
    state = np.random.SeedSequence([int(part) for part in key]).generate_state(2)
    return torch.Generator().manual_seed(int(state[0]) << 31 | int(state[1]) >> 1)
