"""The single controller: the trainer, advantages and their checks, staleness, interrupts, preflight checks.

Modules are imported by their full path; this package face re-exports nothing."""
