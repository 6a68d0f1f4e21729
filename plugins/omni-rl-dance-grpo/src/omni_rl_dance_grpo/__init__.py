"""DanceGRPO for omni-rl: the ``dance_sde`` sampler and the ``dance_grpo`` preset (timestep_fraction and the
advantage options live in omni-rl-flow-grpo; the per-reward aggregation and the trained-column gather in the core)."""
