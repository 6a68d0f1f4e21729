"""The update engines a policy worker runs: torch only, no Ray (trajectory and forward-process updates,
optimizer stepping, micro-batches, FSDP2 helpers, rollout correction, host/device residency).

Modules are imported by their full path; this package face re-exports nothing."""
