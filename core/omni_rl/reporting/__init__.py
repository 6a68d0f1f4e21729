"""What a run reports: the metrics logger and its backends, the metrics reader, reward curves, image and video
grids, run summaries and ``omni-rl compare``.

Modules are imported by their full path; this package face re-exports nothing."""
