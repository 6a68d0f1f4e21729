"""Rewards on the driver: the combined reward, its health checks, frame-wise video scoring, and the reward wire
protocol that ``serve-reward`` and the ``http`` reward speak.

Modules are imported by their full path; this package face re-exports nothing."""


def __getattr__(name: str):
    from omni_rl.compat import moved_attribute

    return moved_attribute(__name__, name)
