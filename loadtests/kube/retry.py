"""When to send a request again, as client-go does: one rule for both of the harness's transports (the threads'
RestClient and the load's gevent KubeApi), kept free of I/O so that it is the same rule in both and can be
tested on its own. Each transport does the waiting (a thread's sleep; gevent's, which yields) and the counting.

client-go@v0.37.2, `rest/request.go` (`Request.request`, `Request.Watch`, `checkWait`, `retryAfterSeconds`) and
`rest/with_retry.go` (`withRetry.IsNextRetry`, `retryAfterResponse`):

- an answer is resent when its status is 429 or >= 500 **and** it carries a `Retry-After` of whole seconds
  (`checkWait`, `retryAfterSeconds`: `strconv.Atoi`, so "1.5" or an HTTP date is no wait and no retry), after
  waiting that long; any verb, since the server did not act on it;
- a GET whose connection broke (reset, EOF, HTTP/2 connection lost: `isErrRetryableFunc` in `Request.request`)
  is resent as if the server had said `Retry-After: 1` (`retryAfterResponse`); a refused connection is not, nor
  a POST, PUT, PATCH or DELETE whose connection broke;
- at most `maxRetries` (10, `NewRequest`) resends, 11 attempts in all; the last answer is the caller's.

Left out: the client's backoff manager (by default `NoBackoff`, a delay of 0, unless KUBE_CLIENT_BACKOFF_BASE and
KUBE_CLIENT_BACKOFF_DURATION are set: `readExpBackoffConfig` in `rest/client.go`), since no agent imitated here
sets them; the client-side rate limiter each resend waits for again (the harness has none); `Request.Watch`'s
retry of a timed-out connection and its empty watch after the last one (the Reflector's own backoff follows a
watch that could not be opened either way).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

# the type of the load's statistics rows of resends: a row per request name (the same name as the request's own
# row), one count per resend, its "response time" the wait before it (the server's Retry-After, or 1 s after a
# broken connection). Every attempt is also an entry of the request's own row, as the apiserver counts each.
RETRIED = "RETRY"
MAX_RETRIES = 10  # client-go's Request.maxRetries (rest/request.go, NewRequest)
BROKEN_CONNECTION_WAIT_S = 1.0  # rest/with_retry.go, retryAfterResponse: an artificial "Retry-After: 1"
_WHOLE = re.compile(r"[+-]?[0-9]+")  # what Go's strconv.Atoi takes


def retry_after_s(status: int, headers: Mapping[str, str] | None) -> float | None:
    """The wait before resending an answer with this status and headers, or None when it is not to be resent:
    client-go's `checkWait` (429 or >= 500) and `retryAfterSeconds` (a Retry-After of whole seconds)."""
    if status != 429 and status < 500:
        return None
    value = _header(headers or {}, "Retry-After")
    if value is None or not _WHOLE.fullmatch(value):
        return None
    return float(max(0, int(value)))  # a negative wait is Go's timer firing at once


def _header(headers: Mapping[str, str], name: str) -> str | None:
    """A header's value whatever its case (urllib3's and geventhttpclient's headers ignore case; a dict does not)."""
    found = headers.get(name)
    if found is None:
        found = next((v for k, v in headers.items() if k.lower() == name.lower()), None)
    return None if found is None else str(found)


@dataclass(frozen=True)
class RetryPolicy:
    """Whether, and after how long, a request is sent again; `retries` is how many times it was resent already.
    CLIENT_GO is client-go's rule; the parameters exist for clients that must not follow it (`answers` False:
    no answer is resent; `broken_wait_s` None: no broken connection is)."""

    max_retries: int = MAX_RETRIES
    answers: bool = True
    broken_wait_s: float | None = BROKEN_CONNECTION_WAIT_S

    def after_answer(self, status: int, headers: Mapping[str, str] | None, retries: int) -> float | None:
        """Seconds to wait before resending a request answered so, or None: the answer is the caller's."""
        if not self.answers or retries >= self.max_retries:
            return None
        return retry_after_s(status, headers)

    def after_broken_connection(self, method: str, retries: int) -> float | None:
        """Seconds to wait before resending a request whose connection broke (reset, EOF), or None: the error is
        the caller's. Only a GET: a write may have reached the server."""
        if self.broken_wait_s is None or retries >= self.max_retries or method.upper() != "GET":
            return None
        return self.broken_wait_s


CLIENT_GO = RetryPolicy()
# the availability probe's rule (measure/availability.py): a GET once more at once on a reset connection, no
# answer resent, so that each probe says what the apiserver answered in the second it was sent
ONCE_ON_RESET = RetryPolicy(max_retries=1, answers=False, broken_wait_s=0.0)


class Retried(NamedTuple):
    """A client's resends of one kind of request: how many, and the seconds waited before them."""

    count: int
    waited_s: float
