"""omni-rl-geneval: GenEval (Ghosh et al. 2023) as a scorer, a training reward and an ``omni-rl eval`` benchmark."""
