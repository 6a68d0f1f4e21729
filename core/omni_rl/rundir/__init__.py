"""The run directory: fresh start or resume, the run lock, checkpoints and their manifests, verify, export.

Modules are imported by their full path; this package face re-exports nothing."""


def __getattr__(name: str):
    from omni_rl.compat import moved_attribute

    return moved_attribute(__name__, name)
