"""When a client stops sending: the first fatal reason, and the failure streaks that make one.

Reads and writes nothing; `client.LLM` keeps one `Stops` and tells it of every answer, reply and failure.
Two streaks stop a run once max(3, concurrency) failures come in a row (one per slot, so a stray failure
stops nothing): requests that failed after every retry (the endpoint is down, or answers nothing
readable), and HTTP requests that timed out (the endpoint takes connections but does not answer in
time: the run gives up after at most that many --timeout periods and their back-off, about one where 3 or
more requests are in flight at once, however many requests are left). The state changes only under one
lock, as run_many's threads share it: a streak counts every failure once and the first fatal reason is
the one kept.
"""

from __future__ import annotations

import threading

from vhmine.errors import LLMError, LLMMalformedError, LLMUnavailableError
from vhmine.llm.redact import _describe, not_json


class Malformed(ValueError):
    """An answer that came back but cannot be read; its text says what came back."""


def timed_out(err: Exception | None) -> bool:
    """A read that timed out (openai's class, named without importing openai here) or an attempt past its deadline."""
    return type(err).__name__ in ("APITimeoutError", "RequestDeadline")


def checked_body(r):
    """`r`, a parsed answer, unless it is the text of a body that is not JSON: the openai client hands back the
    text of a 200 whose Content-Type is not JSON (an HTML page), which is then Malformed, saying so."""
    if isinstance(r, str):
        raise Malformed(not_json(r))
    return r


class Stops:
    def __init__(self, endpoint: str, timeout_s: float, concurrency: int):
        self.endpoint, self.timeout_s = endpoint, timeout_s
        self.limit = max(3, concurrency)
        self.lock = threading.Lock()
        self.reason: LLMError | None = None
        self.event = threading.Event()  # set with `reason`: wakes retries waiting in their back-off
        self.down_streak = 0  # requests that failed after every retry since the last answer
        self.timeout_streak = 0  # HTTP requests that timed out since the endpoint last sent anything back

    def stop(self, err: LLMError) -> LLMError:
        """Stop sending, for the first fatal reason; later ones do not replace it. Returns the reason kept."""
        with self.lock:
            return self._stop(err)

    def _stop(self, err: LLMError) -> LLMError:
        if self.reason is None:
            self.reason = err
            self.event.set()
        return self.reason

    def answered(self) -> None:
        with self.lock:
            self.down_streak = self.timeout_streak = 0

    def replied(self) -> None:
        """The endpoint sent something back in time (an error status, an unreadable body): it is not hanging."""
        with self.lock:
            self.timeout_streak = 0

    def timed_out(self) -> None:
        """One more HTTP request timed out; enough in a row stop the run instead of waiting --timeout on every item."""
        with self.lock:
            self.timeout_streak += 1
            if self.timeout_streak >= self.limit:
                self._stop(
                    LLMUnavailableError(
                        f"{self.endpoint} does not answer in time: {self.timeout_streak} requests in a row timed out "
                        f"after {self.timeout_s:g} s each (--timeout), so nothing more is sent; if the model is only "
                        "slow, raise --timeout or lower --concurrency"
                    )
                )

    def failed(self, last: Exception | None) -> None:
        """One more request failed after every retry (`last`: its last error); enough in a row stop the run."""
        with self.lock:
            self.down_streak += 1
            if self.down_streak < self.limit:
                return
            n, what = self.down_streak, _describe(last, self.timeout_s)
            if isinstance(last, Malformed):
                self._stop(
                    LLMMalformedError(
                        f"{self.endpoint} answers, but nothing readable ({n} requests in a row got "
                        f"{what}): check that --base-url is an OpenAI-compatible endpoint"
                    )
                )
            elif timed_out(last):
                self._stop(
                    LLMUnavailableError(
                        f"{self.endpoint} does not answer in time ({n} requests in a row failed, last: {what})"
                    )
                )
            else:
                self._stop(
                    LLMUnavailableError(
                        f"{self.endpoint} is down ({n} requests in a row failed, last: {what}); rerun when it is back"
                    )
                )
