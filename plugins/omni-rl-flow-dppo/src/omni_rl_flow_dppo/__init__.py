"""Flow-DPPO for omni-rl: the ``flow_dppo`` loss and the ``flow_dppo`` algorithm preset."""
