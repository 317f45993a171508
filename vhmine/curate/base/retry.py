"""Every curation transition retried when PostgreSQL aborts it or its connection breaks before the commit.

Reads and writes nothing itself: `retried` runs a transition (which opens its own transaction) again, so a
PostgreSQL deadlock or serialization failure, or a connection lost before the commit (a server restart), never
reaches the app as a driver exception; after TRIES attempts the caller gets an error that says so.
"""

from __future__ import annotations

import functools
import random
import time

from sqlalchemy.exc import DBAPIError

from vhmine.errors import LeaseError, StoreConnectionError
from vhmine.store import is_disconnect

TRIES = 4  # attempts of a transition that PostgreSQL aborted to break a deadlock, or whose connection broke
_ABORTED = {"40P01": "a deadlock", "40001": "a serialization conflict"}  # PostgreSQL SQLSTATEs worth a retry


def retried(fn):
    """Run the curation transition `fn` (which opens its own transaction) again when PostgreSQL aborted
    it to break a deadlock or a serialization conflict with another worker, or when the connection broke
    before its commit (the server restarted): the rolled-back attempt changed nothing, and the next one
    waits for the server (Store.session). A connection that broke during the commit itself is not retried
    (StoreConnectionError: it may have been saved), so nothing is applied twice. After TRIES attempts, an
    error that says so, never the driver's exception."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        for attempt in range(TRIES):
            try:
                return fn(*args, **kwargs)
            except DBAPIError as err:
                orig = err.orig
                why = _ABORTED.get(getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None))
                if why is None and is_disconnect(err):
                    why = "a lost connection"
                    continue  # the next attempt's session waits for the server to come back
                if why is None:
                    raise
            if attempt + 1 < TRIES:
                time.sleep(random.uniform(0, 0.02 * 2**attempt))  # let the other side finish first
        what = fn.__name__.replace("_", " ")
        if why == "a lost connection":
            raise StoreConnectionError(
                f"{what}: the connection to the store broke {TRIES} times before saving: nothing saved; try again"
            )
        raise LeaseError(
            f"the store is busy: {what} was aborted {TRIES} times by the database to resolve {why} "
            "with other workers: nothing saved; try again"
        )

    return run
