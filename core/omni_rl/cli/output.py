"""Terminal output: rich when it helps, plain text where a user or a script reads it verbatim.

Messages are rich ``Text`` objects (never markup strings: a config message like ``missing section [loss]``
must print as written) and are never wrapped, so tests and ``grep`` see one problem per line. rich honours
``NO_COLOR`` and drops styling when the output is not a terminal.
"""

from __future__ import annotations

import sys
import traceback

from rich.console import Console, RenderableType
from rich.text import Text

from omni_rl.errors import OmniRLError
from omni_rl.registry import Registry
from omni_rl.reporting.console_width import print_whole
from omni_rl.runtime.faults import describe_remote, strip_actor_ids, strip_ansi


class Output:
    """stdout for results, stderr for errors, warnings and tracebacks (``--debug`` only)."""

    def __init__(self, debug: bool = False) -> None:
        self.debug = debug
        self.out = Console(highlight=False, soft_wrap=True)
        self.err = Console(stderr=True, highlight=False, soft_wrap=True)

    def print(self, renderable: RenderableType) -> None:
        print_whole(self.out, renderable)  # a table is not folded mid-word off a terminal

    def plain(self, text: str) -> None:
        """Text for machines (JSON, TOML): written as is, no styling, no wrapping."""
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()

    def plugin_warnings(self, registry: Registry) -> None:
        """What a command that loads components warns about first: the registry's warnings (an unmatched
        ``OMNI_RL_LOAD_PLUGINS`` name) and each plugin that failed to load."""
        for warning in registry.warnings:
            self.warning(warning)
        for info in registry.plugins:
            if info.status == "error":
                self.warning(f"plugin {info.label} ({info.entry_point}) failed to load: {info.error}")

    def success(self, message: str) -> None:
        self.out.print(Text(message, style="green"))

    def warning(self, message: str) -> None:
        self.err.print(Text.assemble(("warning: ", "bold yellow"), message))

    def error(self, exc: OmniRLError) -> None:
        """A user-actionable failure: message and hint, the traceback only with ``--debug``."""
        self.traceback(exc)
        self.err.print(Text.assemble(("error: ", "bold red"), self._clean(exc.message)))
        if exc.hint:
            self.err.print(Text.assemble(("hint: ", "yellow"), self._clean(exc.hint)))

    def unexpected(self, exc: BaseException) -> None:
        """A bug or an environment failure: one line, and how to get the traceback. An error from a Ray actor is
        named by the exception raised inside it, not Ray's wrapper (omni_rl.runtime.faults)."""
        self.traceback(exc)
        self.err.print(Text.assemble(("error: ", "bold red"), self._clean(describe_remote(exc))))
        if not self.debug:
            self.err.print(Text.assemble(("hint: ", "yellow"), "rerun with --debug for the traceback"))

    def _clean(self, text: str) -> str:
        """Messages carry no terminal escapes of their own (rich styles them, or not under NO_COLOR / a pipe); Ray's
        actor reprs and ids in a message are kept for ``--debug``."""
        text = strip_ansi(text)
        return text if self.debug else strip_actor_ids(text)

    def traceback(self, exc: BaseException) -> None:
        if self.debug:
            self.err.print(Text(strip_ansi("".join(traceback.format_exception(exc))), style="dim"))

    def details(self, text: str) -> None:
        """Extra diagnostics (a failed plugin's traceback), shown with ``--debug``."""
        if self.debug:
            self.err.print(Text(text.rstrip(), style="dim"))
