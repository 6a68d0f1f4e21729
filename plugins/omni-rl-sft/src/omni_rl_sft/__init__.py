"""omni-rl-sft: supervised flow matching (the ``sft`` loss and the ``online_sft`` / ``sft_offline`` presets)."""
