"""Reward servers: ``omni-rl serve-reward CONFIG`` serves installed reward components over HTTP on Ray Serve.

The protocol is :mod:`omni_rl.rewards.protocol` (JSON, documented in docs/rewards.md); the ``http`` reward of
omni-rl-rewards-remote is its client. Ray Serve is imported only when a server starts.
"""

from __future__ import annotations

from omni_rl.serving.config import ServeConfig, ServedReward, load_serve_config

__all__ = ["ServeConfig", "ServedReward", "load_serve_config"]
