"""Library chatter kept off a command's output: ``omni-rl export`` printed transformers/torch warnings and
diffusers' "Loading pipeline components" progress bars around its one line of result, which buried it (and a
script reading stdout got the bars too). ``--debug`` keeps all of it, for when something is actually wrong."""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator

#: the libraries whose loggers go quiet (their WARNING and INFO; errors still print)
LIBRARIES = ("transformers", "diffusers", "torch", "peft", "huggingface_hub", "accelerate", "safetensors")
#: environment switches those libraries (and tqdm) read when they start or draw a bar
QUIET_ENV = {
    "TRANSFORMERS_VERBOSITY": "error",
    "DIFFUSERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TQDM_DISABLE": "1",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
}


@contextlib.contextmanager
def quiet_libraries(enabled: bool = True) -> Iterator[None]:
    """Within the block: the libraries' warnings, log messages below ERROR and progress bars are not shown.
    Everything is put back afterwards (environment, logger levels, warning filters)."""
    if not enabled:
        yield
        return
    saved_env = {key: os.environ.get(key) for key in QUIET_ENV}
    loggers = {name: logging.getLogger(name) for name in LIBRARIES}
    saved_levels = {name: logger.level for name, logger in loggers.items()}
    os.environ.update(QUIET_ENV)
    for logger in loggers.values():
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        for name, logger in loggers.items():
            logger.setLevel(saved_levels[name])
