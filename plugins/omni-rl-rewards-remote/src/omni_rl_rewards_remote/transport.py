"""One JSON POST with timeouts and retries with exponential back-off (standard library only).

Retried: connection errors, timeouts, HTTP 429 and 5xx (a server that is loading, overloaded or restarting).
Final at once: other HTTP errors (a wrong model name, a bad key, a malformed request won't get better) and a
request ``http.client`` refuses to send (a header value it rejects). Every failure ends in a
:class:`RemoteCallError` whose message names the URL and the last cause, with the API key scrubbed out.
"""

from __future__ import annotations

import http.client
import json
import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import attrs

from omni_rl_rewards_remote.secrets import redact, redacted_excerpt

if TYPE_CHECKING:
    from omni_rl_rewards_remote.config import RetryOptions

#: how much of an error response body goes into a message
_BODY_CHARS = 300
_RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})


class RemoteCallError(Exception):
    """A call that failed for good (after its retries); ``retryable`` says whether retries were tried."""

    def __init__(self, message: str, *, retryable: bool, attempts: int) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.attempts = attempts


@attrs.frozen(kw_only=True)
class Retry:
    """Timeouts and back-off of one call (see RetryOptions in config.py)."""

    timeout_s: float
    max_retries: int
    backoff_s: float
    max_backoff_s: float

    @classmethod
    def of(cls, options: RetryOptions) -> Retry:
        """The retry settings of a remote reward's options."""
        return cls(
            timeout_s=options.timeout_s,
            max_retries=options.max_retries,
            backoff_s=options.backoff_s,
            max_backoff_s=options.max_backoff_s,
        )

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds before retry ``attempt`` (0-based): exponential, capped, with up to 10% jitter so that many
        threads do not retry in lockstep; at least the server's Retry-After when it sent one."""
        base = min(self.backoff_s * 2**attempt, self.max_backoff_s)
        if retry_after is not None:
            base = max(base, min(retry_after, self.max_backoff_s))
        return base * (1.0 + 0.1 * random.random())


def post_json(
    url: str,
    body: Mapping[str, Any],
    *,
    retry: Retry,
    headers: Mapping[str, str] | None = None,
    secret: str = "",
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """POST ``body`` as JSON to ``url`` and return the decoded JSON reply, or raise RemoteCallError."""
    data = json.dumps(body).encode("utf-8")
    request_headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
    attempts = retry.max_retries + 1
    for attempt in range(attempts):
        request = urllib.request.Request(url, data=data, headers=request_headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=retry.timeout_s) as response:
                payload = response.read()
            try:
                return json.loads(payload)
            except ValueError as exc:
                raise RemoteCallError(
                    f"POST {url}: the reply is not JSON ({exc}): {_excerpt(payload, secret)}",
                    retryable=False,
                    attempts=attempt + 1,
                ) from None
        except urllib.error.HTTPError as exc:
            reason = f"HTTP {redact(f'{exc.code} {exc.reason}', secret)}: {_excerpt(_read(exc), secret)}"
            retryable = exc.code in _RETRIED_STATUS
            retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
        except (urllib.error.URLError, http.client.HTTPException, TimeoutError, ConnectionError) as exc:
            cause = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if isinstance(cause, TimeoutError):
                reason = f"no reply within {retry.timeout_s:g} s (options.timeout_s)"
            else:
                reason = redact(f"{type(cause).__name__}: {cause}", secret)
            retryable, retry_after = True, None
        except ValueError as exc:  # http.client refusing a header value: its text quotes the header, key and all
            reason = redact(f"{type(exc).__name__}: {exc}", secret)
            retryable, retry_after = False, None
        if not retryable or attempt == attempts - 1:
            tries = f" after {attempt + 1} attempts" if attempt else ""
            raise RemoteCallError(f"POST {url} failed{tries}: {reason}", retryable=retryable, attempts=attempt + 1)
        sleep(retry.delay(attempt, retry_after))
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _read(exc: urllib.error.HTTPError) -> bytes:
    try:
        return exc.read()
    except OSError:
        return b""


def _excerpt(payload: bytes, secret: str) -> str:
    """The start of a reply body for a message: the key redacted from the whole body before it is cut."""
    return redacted_excerpt(payload.decode("utf-8", errors="replace").strip(), secret, _BODY_CHARS)


def _retry_after(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None  # an HTTP date: ignored, the exponential back-off applies
