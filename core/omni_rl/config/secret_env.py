"""Secrets read from environment variables a config names (``*_env`` options, ``[server] token_env``).

A key exported from a Kubernetes Secret made with ``echo sk-... | base64``, or read from a file with a final
newline, ends in ``\\n``. Sent as it is, ``http.client`` refuses the header and its error quotes the whole header,
key included, on the console. So a value is read stripped of surrounding whitespace (no API key or token has
any), and a value with a control character, whitespace or a non-ASCII character *inside* it (a pasted
``\\r\\n`` between two keys, a key cut over two lines: none can be a bearer token) is refused before anything
runs, naming the variable, never the value: guessing which part is the key would send the wrong secret somewhere.
"""

from __future__ import annotations

import os


def read_secret(name: str) -> str:
    """The value of ``$name`` without surrounding whitespace ("" when unset, empty or only whitespace)."""
    return os.environ.get(name, "").strip() if name else ""


def secret_problem(value: str) -> str | None:
    """Why ``value`` (already stripped) cannot be sent as a bearer token, or None. Never quotes the value."""
    if any(not "!" <= char <= "~" for char in value):  # a bearer token is printable ASCII without spaces
        return (
            "holds a control character, whitespace or a non-ASCII character inside it (a line break pasted into the "
            "value, or two values joined); export the key alone, on one line"
        )
    return None
