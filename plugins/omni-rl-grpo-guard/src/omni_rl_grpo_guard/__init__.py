"""GRPO-Guard for omni-rl: the ``grpo_guard`` loss and the ``grpo_guard`` algorithm preset."""
