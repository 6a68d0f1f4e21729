"""Tables and long lines printed whole when the output is not a terminal.

Off a TTY (a pipe, a log file, CI) rich assumes 80 columns, so the end-of-run summary and ``omni-rl plugins``
folded cells and paths mid-word, and the printed ``omni-rl export`` command came out split over two lines that no
longer paste into a shell. A file has no width: there, a renderable is printed at its natural width. On a terminal
rich keeps fitting it to the window, which is what a person reading it wants, and so does an explicit ``COLUMNS``.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.measure import Measurement


def natural_width(console: Console, renderable: Any) -> int | None:
    """The width to print ``renderable`` at: None (the console's own) on a terminal, else at least its widest
    line, so nothing wraps."""
    if console.is_terminal or os.environ.get("COLUMNS", "").strip():  # a width the user asked for: kept
        return None
    widest = Measurement.get(console, console.options.update(width=100_000), renderable).maximum
    return max(console.width, widest)


def print_whole(console: Console, renderable: Any) -> None:
    """``console.print(renderable)``, unwrapped off a terminal (see the module docstring). The console's width is
    widened for this one print (``print(width=)`` alone is capped at the console's width and cropped to it)."""
    soft_wrap = True if isinstance(renderable, str) else None
    width = natural_width(console, renderable)
    if width is None or width <= console.width:
        console.print(renderable, soft_wrap=soft_wrap)
        return
    previous = console._width  # None: the console measures its file each time; kept as it was
    console.width = width
    try:
        console.print(renderable, soft_wrap=soft_wrap)
    finally:
        console._width = previous
