"""``omni-rl eval``: the benchmark loop, the generator that samples a checkpoint, side-by-side comparison.

Modules are imported by their full path; this package face re-exports nothing."""


def __getattr__(name: str):
    from omni_rl.compat import moved_attribute

    return moved_attribute(__name__, name)
