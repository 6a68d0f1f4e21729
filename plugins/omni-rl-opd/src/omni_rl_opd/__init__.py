"""omni-rl-opd: on-policy distillation (DiffusionOPD, arXiv 2605.15055): the ``opd`` loss and preset."""
