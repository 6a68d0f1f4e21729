"""omni-rl-rloo: the ``rloo`` advantage estimator (REINFORCE leave-one-out), a third-party-style omni-rl plugin."""
