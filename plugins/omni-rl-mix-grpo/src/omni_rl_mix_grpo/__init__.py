"""MixGRPO(-Flash) for omni-rl: the ``mix_grpo`` algorithm preset (the window and solver live in omni-rl-flow-grpo)."""
