"""The API key: read from the environment variable the config names, and kept out of every message.

The key is read where the calls are made (the driver, or the reward's own Ray actor) and never stored on the
reward, so it is not pickled into an actor or written anywhere; :func:`redact` scrubs it from any text that
could reach a log or an error (a server may echo a request header back in its error body). It is read without
surrounding whitespace (a Kubernetes Secret made with ``echo`` ends in a newline) and refused with a control
character or whitespace inside it (:mod:`omni_rl.config.secret_env`): ``http.client`` quotes a header it refuses
whole, key included, in its error.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from omni_rl.config.secret_env import read_secret, secret_problem
from omni_rl.errors import ConfigError, RuntimeFailure

MASK = "***"


def read_api_key(env_name: str, reward: str) -> str:
    """The key in ``$env_name`` ("" when no variable is configured); a configured but unset one is a ConfigError
    (exit 2, like any setup mistake the user fixes before the run: it is raised while the reward is built)."""
    if not env_name:
        return ""
    key = read_secret(env_name)
    if not key:
        raise ConfigError(
            f"the {reward} reward's API key variable {env_name} (options.api_key_env) is not set in this process",
            hint=f"export {env_name}=<your key> before starting the run (on every Ray node that scores this "
            'reward), or set options.api_key_env = "" for a server without authentication',
        )
    problem = secret_problem(key)
    if problem is not None:  # the value is never quoted: only the variable's name
        raise ConfigError(
            f"the {reward} reward's API key variable {env_name} (options.api_key_env) {problem}",
            hint=f"re-export {env_name} with the key alone (e.g. from a Kubernetes Secret made with `printf`, "
            "not `echo`); `omni-rl check` finds this before a run starts",
        )
    return key


def secret_forms(secret: str) -> list[str]:
    """Every way ``secret`` can appear in an error's text, longest first: as it is, without surrounding
    whitespace, and escaped as ``repr`` writes it (``b'Bearer sk-...\\n'`` in http.client's refusal of a header)."""
    forms = {secret, secret.strip()}
    forms |= {repr(form)[1:-1] for form in list(forms)} | {repr(form.encode())[2:-1] for form in list(forms)}
    return sorted((form for form in forms if form), key=len, reverse=True)


def redact(text: str, secret: str) -> str:
    """``text`` with every occurrence of ``secret`` (in each of its :func:`secret_forms`) replaced by ***."""
    for form in secret_forms(secret) if secret else ():
        text = text.replace(form, MASK)
    return text


@contextmanager
def key_kept_out(secret: str, reward: str) -> Iterator[None]:
    """Re-raise an exception whose text holds ``secret`` as a RuntimeFailure with the key masked (and no
    traceback, whose frames could quote it): the last guard for an error no handler expected (e.g. a library
    that quotes a header it refuses). Exceptions without the key pass through unchanged."""
    try:
        yield
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        if not secret or redact(text, secret) == text:
            raise
        raise RuntimeFailure(f"the {reward} reward failed: {redact(text, secret)}") from None


def redacted_excerpt(text: str, secret: str, limit: int) -> str:
    """At most ``limit`` characters of ``text`` (then "..."), with no part of ``secret`` in them.

    Redacting must come first: cut first, and a key that straddles the cut is no longer a whole occurrence, so
    ``redact`` misses it and the text keeps every character of the key up to the cut (a server that echoes the
    bearer token into its error body at the right offset got 15 of 16 characters through). After the whole-key
    pass, a tail that is a prefix of the key is masked too: at our cut, a prefix of any length (the text may
    hold a partial key there, and every character given away is one an attacker need not guess); at the end of
    an uncut text (which the server may have cut inside a key), one of ``MIN_PREFIX`` characters or more, so
    that an ordinary message ending in the key's first letter ("errors" with a key "sk-...") stays readable.
    """
    text = redact(text, secret)
    if len(text) <= limit:
        return mask_key_prefix_at_end(text, secret, MIN_PREFIX)
    return mask_key_prefix_at_end(text[:limit], secret, 1) + "..."


#: the shortest key prefix masked at the end of a text that was not cut here
MIN_PREFIX = 4


def mask_key_prefix_at_end(text: str, secret: str, shortest: int = 1) -> str:
    """``text`` with its longest tail that is a prefix of ``secret`` (``shortest`` characters or more) replaced
    by ***."""
    for size in range(min(len(secret), len(text)), max(shortest, 1) - 1, -1):
        if text.endswith(secret[:size]):
            return text[:-size] + MASK
    return text


def auth_headers(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}
