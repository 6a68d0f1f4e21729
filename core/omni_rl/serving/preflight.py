"""What ``omni-rl serve-reward`` checks before Ray starts: the token, the listening address, an open server.

Each is cheap here and costly later: a configured token that is missing must not start the server open; a port
in use or a host that is no address of this machine failed inside Ray's HTTP proxy, after its start-up, with 26
lines of Ray tracebacks; and a server on a network address without a token scores for anyone who reaches it,
which the operator should hear about once, at start (docs/rewards.md, "A server facing a network").
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from omni_rl.config.secret_env import read_secret
from omni_rl.errors import ConfigError
from omni_rl.serving.config import ServerSection
from omni_rl.serving.token import SHORT_TOKEN, token_problem


def require_token(token_env: str) -> None:
    """A server configured with a token must not start without a usable one: a ConfigError (exit 2) before Ray
    starts, naming the variable (never its value)."""
    problem = token_problem(token_env)
    if problem is not None:
        raise ConfigError(
            f"{problem} @ $.server.token_env",
            hint=f"export {token_env}=<token> (the token alone, on one line; and the same in the runs' http reward: "
            f'options.api_key_env = "{token_env}"), or remove token_env to serve without a token',
        )


def is_loopback(host: str) -> bool:
    """Whether ``host`` serves this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_warnings(server: ServerSection) -> list[str]:
    """Lines to print before serving: an unauthenticated server on a network address, a short token."""
    warnings = []
    if not server.token_env and not is_loopback(server.host):
        warnings.append(
            f"[server] host = {server.host!r} serves the network and no token_env is set: anyone who can reach port "
            f"{server.port} can score with this server's models (and keep them busy); set [server] token_env to "
            "require a bearer token (docs/rewards.md, A server facing a network)"
        )
    if server.token_env and len(read_secret(server.token_env)) < SHORT_TOKEN:
        warnings.append(
            f"the token in {server.token_env} has fewer than {SHORT_TOKEN} characters, which can be guessed; use a "
            "random one, e.g. `openssl rand -hex 32`"
        )
    return warnings


def check_listen(host: str, port: int) -> None:
    """ConfigError (exit 2) when this machine cannot listen on ``host:port`` (a port in use, a host that is not
    one of its addresses), found by binding a socket the way Ray Serve's proxy will, and closing it."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, UnicodeError) as exc:
        raise ConfigError(
            f"[server] host = {host!r} is not an address of this machine ({exc}) @ $.server.host",
            hint='use "127.0.0.1" for this machine only or "0.0.0.0" for every interface',
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a closed port in TIME_WAIT is free
        try:
            probe.bind(address)
        except OSError as exc:
            in_use = exc.errno == errno.EADDRINUSE
            where = "port" if in_use else "host"
            raise ConfigError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc} @ $.server.{where}",
                hint="stop what holds the port (e.g. another serve-reward) or choose another [server] port"
                if in_use
                else 'use an address of this machine: "127.0.0.1" for this machine only, "0.0.0.0" for every interface',
            ) from None
