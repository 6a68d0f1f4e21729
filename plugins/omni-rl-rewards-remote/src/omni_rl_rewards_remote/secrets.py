"""The API key: read from the environment variable the config names, and kept out of every message.

The key is read where the calls are made (the driver, or the reward's own Ray actor) and never stored on the
reward, so it is not pickled into an actor or written anywhere; :func:`redact` scrubs it from any text that
could reach a log or an error (a server may echo a request header back in its error body).
"""

from __future__ import annotations

import os

from omni_rl.errors import RuntimeFailure

MASK = "***"


def read_api_key(env_name: str, reward: str) -> str:
    """The key in ``$env_name`` ("" when no variable is configured); a configured but unset one is an error."""
    if not env_name:
        return ""
    key = os.environ.get(env_name, "")
    if not key:
        raise RuntimeFailure(
            f"the {reward} reward's API key variable {env_name} (options.api_key_env) is not set in this process",
            hint=f"export {env_name}=<your key> before starting the run (on every Ray node that scores this "
            'reward), or set options.api_key_env = "" for a server without authentication',
        )
    return key


def redact(text: str, secret: str) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ***."""
    return text.replace(secret, MASK) if secret else text


def auth_headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}
