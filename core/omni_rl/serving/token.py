"""The bearer token of ``[server] token_env``: read where ``serve-reward`` runs, and never handed to Ray.

Ray writes what it is given for its actors to its logs: a token passed to the replicas in a ``runtime_env`` was in
clear in ``runtime_env_agent.log`` (mode 644, issue 48 N2). So the token itself stays in the ``serve-reward``
process, which takes it out of its environment before Ray starts (Ray's processes inherit that environment): the
replicas receive only a random salt and the salted SHA-256 of the token (:class:`TokenDigest`), and hash each
request's token the same way and compare the two digests in constant time (:func:`hmac.compare_digest`).
Nothing Ray holds, logs or pickles is then the secret; the digest lets nobody authenticate (only the token does),
and with a random token of 128 bits or more (``openssl rand -hex 32``) it cannot be reversed by guessing either.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets

import attrs

from omni_rl.config.secret_env import read_secret, secret_problem

#: bytes of the random salt of each server start
SALT_BYTES = 16
#: a token shorter than this is accepted, with a warning (a short one can be guessed from its digest)
SHORT_TOKEN = 16


def _digest(salt: bytes, token: str) -> bytes:
    return hashlib.sha256(salt + token.encode("utf-8", errors="surrogateescape")).digest()


@attrs.frozen
class TokenDigest:
    """What a replica knows of the token: a salt and the token's salted SHA-256 (neither in any repr)."""

    salt: bytes = attrs.field(repr=False)
    digest: bytes = attrs.field(repr=False)

    @classmethod
    def of(cls, token: str) -> TokenDigest:
        """The digest of ``token`` under a fresh random salt."""
        salt = secrets.token_bytes(SALT_BYTES)
        return cls(salt=salt, digest=_digest(salt, token))

    def matches(self, sent: str) -> bool:
        """Whether ``sent`` is the token; the time taken does not depend on where the first wrong byte is."""
        return hmac.compare_digest(_digest(self.salt, sent), self.digest)


def token_problem(token_env: str) -> str | None:
    """Why ``$token_env`` cannot protect a server (unset, empty, or not one printable token), or None. Names the
    variable, never its value."""
    if not token_env:
        return None
    token = read_secret(token_env)
    if not token:
        return f"[server] token_env names {token_env}, which is not set (or empty)"
    problem = secret_problem(token)
    return None if problem is None else f"[server] token_env names {token_env}, which {problem}"


def read_token_digest(token_env: str) -> TokenDigest | None:
    """The :class:`TokenDigest` of the token in ``$token_env`` (its surrounding whitespace dropped, as the ``http``
    reward drops it from its key), or None when no variable is configured; ValueError naming the variable when it
    cannot be used (:func:`token_problem`), so a server meant to be protected never starts open."""
    if not token_env:
        return None
    problem = token_problem(token_env)
    if problem is not None:
        raise ValueError(problem)
    return TokenDigest.of(read_secret(token_env))


def take_token_digest(token_env: str) -> TokenDigest | None:
    """:func:`read_token_digest`, then ``$token_env`` removed from this process's environment: ``serve-reward``
    takes it before Ray starts, so none of the processes Ray starts (which inherit this environment) holds it."""
    digest = read_token_digest(token_env)
    if token_env:
        os.environ.pop(token_env, None)
    return digest
