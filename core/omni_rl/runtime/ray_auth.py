"""Ray's token authentication, kept on: a Ray cluster without it runs code for anyone who can reach its ports.

Ray (2.59+) turns token authentication on for a cluster that ``ray.init()`` starts and writes a token to
``~/.ray/auth_token`` the first time. omni-rl never turns it off; it only warns when the user did
(``RAY_AUTH_MODE`` set to ``disabled``). Joining a cluster by an explicit address (``[cluster] address = "host:6379"``,
``[server] address``) is the one case where Ray does not look for a token by itself, so when a token is at hand and
the mode is unset, :func:`prepare_auth` sets ``RAY_AUTH_MODE=token`` for this process and its children: the
driver then authenticates to a cluster started with the same token. docs/distributed.md#authentication says how
a cluster's token is shared.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

AUTH_MODE = "RAY_AUTH_MODE"
AUTH_TOKEN = "RAY_AUTH_TOKEN"
AUTH_TOKEN_PATH = "RAY_AUTH_TOKEN_PATH"

DISABLED_WARNING = (
    "warning: RAY_AUTH_MODE is 'disabled', which turns off Ray's token authentication: anyone who can reach this "
    "machine's Ray ports can run code in the cluster; unset it (see docs/distributed.md#authentication)"
)


def default_token_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where Ray reads (and ``ray.init()`` / ``ray get-auth-token --generate`` write) the token by default."""
    environ = os.environ if environ is None else environ
    home = environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".ray" / "auth_token"


def token_available(environ: Mapping[str, str] | None = None) -> bool:
    """Whether Ray would find a token: ``RAY_AUTH_TOKEN``, the file ``RAY_AUTH_TOKEN_PATH`` names, or the default
    file, in Ray's order of precedence."""
    environ = os.environ if environ is None else environ
    if environ.get(AUTH_TOKEN, "").strip():
        return True
    named = environ.get(AUTH_TOKEN_PATH)
    path = Path(named).expanduser() if named else default_token_path(environ)
    try:
        return bool(path.read_text(encoding="utf-8").strip())
    except OSError:
        return False


def auth_disabled(environ: Mapping[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    return environ.get(AUTH_MODE, "").strip().lower() == "disabled"


def prepare_auth(address: str) -> None:
    """Before ``ray.init``: warn (one line, stderr) when the user disabled authentication. With the mode unset, turn
    token mode on for an embedded cluster (what Ray does by default, minus its console line inviting users to opt
    out) and for a cluster joined by address when a token is at hand (see the module docstring)."""
    if auth_disabled():
        sys.stderr.write(DISABLED_WARNING + "\n")
        sys.stderr.flush()
        return
    if AUTH_MODE not in os.environ and (address == "local" or token_available()):
        _enable_token_mode()


def _enable_token_mode() -> None:
    """``RAY_AUTH_MODE=token`` for this process and its children. Ray reads its config once, when it is imported,
    so the variable alone would reach the processes it starts (the GCS, which then finds no token and aborts) but
    not this one: Ray's own switch also re-reads the config."""
    os.environ[AUTH_MODE] = "token"
    try:
        from ray._private.authentication.authentication_token_setup import _enable_token_auth
    except ImportError:  # a Ray without token authentication (< 2.52): nothing more to switch
        return
    _enable_token_auth()


def protect_token_file(environ: Mapping[str, str] | None = None) -> None:
    """Make the token file Ray reads (``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``) readable by its owner
    only: Ray writes it 0644, and anyone who can read it can run code in the cluster. Never raises (a file owned by
    someone else, or none at all, is left as it is)."""
    environ = os.environ if environ is None else environ
    named = environ.get(AUTH_TOKEN_PATH)
    path = Path(named).expanduser() if named else default_token_path(environ)
    try:
        if path.is_file() and path.stat().st_uid == os.getuid() and path.stat().st_mode & 0o077:
            path.chmod(0o600)
    except OSError:
        pass
