"""A deadline for the whole of one HTTP attempt, whatever the server does.

Reads and writes nothing. The HTTP library's time-out bounds each read: a server that sends its headers and then
one byte a second, or its headers one byte at a time, never trips it. `within` runs an attempt in a worker thread
and waits for it at most `seconds`; past that the caller gets `RequestDeadline` (retried, and counted as a time-out,
as the library's own) and `abandon` is called. `Clients.run` gives each attempt a client of its own (made inside
the deadline, reused by later attempts) and, at the deadline, closes it, so the attempt's connection is closed,
other requests' are not, and the worker ends at its next read (at the latest when the library's per-read time-out
fires). The bound is kept here, by the clock, whatever HTTP library the client uses.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class RequestDeadline(TimeoutError):
    """One attempt ran past its deadline and was abandoned (its connection closed)."""

    def __init__(self, seconds: float):
        super().__init__(f"no answer within {seconds:g} s")
        self.seconds = seconds


def within(seconds: float, fn: Callable[[], T], abandon: Callable[[], None]) -> T:
    """`fn()`'s result, or its exception, if it ends within `seconds`; else `abandon()` and RequestDeadline."""
    done = threading.Event()
    box: dict = {}
    ctx = contextvars.copy_context()

    def run() -> None:
        try:
            box["value"] = ctx.run(fn)
        except BaseException as err:  # handed to the caller, who decides; never printed by the thread
            box["error"] = err
        finally:
            done.set()

    threading.Thread(target=run, name="vhmine-request", daemon=True).start()
    if not done.wait(seconds):
        try:
            abandon()
        except Exception:  # closing a client mid-request may complain; the attempt is given up either way
            pass
        raise RequestDeadline(seconds)
    if "error" in box:
        raise box.pop("error")
    return box["value"]


class Clients:
    """The clients of requests in flight, made by `make()` as needed and reused: `run` gives an attempt a client
    of its own, so an attempt abandoned at its deadline closes its client (and so its connection) without
    cutting other requests'; a client is made inside the attempt's deadline, so the bound counts making it."""

    def __init__(self, make: Callable[[], object]):
        self._make = make
        self._lock = threading.Lock()
        self._all: list = []  # open clients
        self._idle: list = []  # open clients no attempt holds

    def take(self):
        with self._lock:
            if self._idle:
                return self._idle.pop()
        client = self._make()
        with self._lock:
            self._all.append(client)
        return client

    def give(self, client) -> None:
        with self._lock:
            if any(c is client for c in self._all):  # not closed meanwhile
                self._idle.append(client)

    def _drop(self, client) -> None:
        with self._lock:
            self._all = [c for c in self._all if c is not client]
            self._idle = [c for c in self._idle if c is not client]
        client.close()

    def run(self, seconds: float, call: Callable[[object], T]) -> T:
        """`call(client)` with a client of its own, within `seconds` (else RequestDeadline, the client closed)."""
        slot: dict = {}

        def attempt() -> T:
            client = self.take()
            with self._lock:
                slot["client"] = client
                gone = slot.get("abandoned", False)
            if gone:  # the deadline passed while the client was made
                self._drop(client)
                raise RequestDeadline(seconds)
            try:
                return call(client)
            finally:
                with self._lock:  # given back only if not abandoned: a client given back may be another's now
                    slot["finished"] = True
                    if not slot.get("abandoned") and any(c is client for c in self._all):
                        self._idle.append(client)

        def abandon() -> None:
            with self._lock:
                slot["abandoned"] = True
                client = None if slot.get("finished") else slot.get("client")
            if client is not None:
                self._drop(client)

        return within(seconds, attempt, abandon)

    def close(self) -> None:
        with self._lock:
            clients, self._all, self._idle = self._all, [], []
        for c in clients:
            c.close()
