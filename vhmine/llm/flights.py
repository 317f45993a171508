"""Single flight: identical requests in flight at once share one outcome.

The first of identical requests (one request key) claims the key and sends; the others, its twins, wait for
that request to end and share its outcome: its answer (read from the cache it was written to) or its failure
(an LLMError in the same words), never sending the request themselves. So a twin ends no later than the
request it waits for, within the bound docs/models.md states for one request, and the server sees the request
no more than that one request's tries. Reads and writes nothing but its own table of requests in flight.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from vhmine.errors import LLMError

T = TypeVar("T")


@dataclass
class Flight:
    """One request in flight: `done` set when it ends; `error`, its failure, for its twins to share."""

    done: threading.Event = field(default_factory=threading.Event)
    error: LLMError | None = None  # None: answered (in the cache), or ended otherwise (Ctrl-C: a twin tries itself)


class Flights:
    """The requests in flight, by request key."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, Flight] = {}

    def cached_or_claim(self, key: str, cached: Callable[[], dict | None]) -> dict | None:
        """`cached()` (the answer in the cache), or None once this thread has claimed `key` (then `sent`). A twin
        of a request in flight waits for it to end, then reads its answer, or raises its failure (shared, not
        tried again); after a request that ended otherwise (Ctrl-C) a twin claims the key itself."""
        while True:
            hit = cached()
            if hit is not None:
                return hit
            twin = self.claim(key)
            if twin is None:
                return None
            twin.done.wait()
            if twin.error is not None:
                raise shared(twin.error)

    def sent(self, key: str, send: Callable[[], T]) -> T:
        """`send()` for the claimed `key`; its outcome lands for the twins waiting on it."""
        try:
            result = send()
        except BaseException as err:
            self.land(key, err)
            raise
        self.land(key, None)
        return result

    def claim(self, key: str) -> Flight | None:
        """None once this thread has claimed `key` (it sends, then calls `land`); else the flight to wait for."""
        with self._lock:
            twin = self._by_key.get(key)
            if twin is None:
                self._by_key[key] = Flight()
            return twin

    def land(self, key: str, error: BaseException | None) -> None:
        """The claimed request under `key` ended: answered (`error` None) or with `error`; its twins wake."""
        with self._lock:
            flight = self._by_key.pop(key, None)
        if flight is not None:
            flight.error = error if isinstance(error, LLMError) else None
            flight.done.set()


def shared(err: LLMError) -> LLMError:
    """The failure of the request a twin waited for, as the twin's own: the same type and words."""
    try:
        copy = type(err)(*err.args)
    except Exception:  # a subclass with another constructor: the base type, in the same words
        copy = LLMError(str(err))
    copy.__cause__, copy.__suppress_context__ = None, True
    return copy
