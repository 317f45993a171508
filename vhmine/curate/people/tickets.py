"""Session tickets: what keeps a worker signed in across a reload of the app, without the token.

Reads `workers` (name, token hash, token generation, active); writes nothing. A ticket is
`<payload>.<signature>`: the payload (base64 of the worker's name, token generation and expiry time) signed with
HMAC-SHA256 keyed by the worker's stored token hash, which never leaves the store. So a ticket holds no token and no
key, cannot be made for another worker or another expiry without the store, and stops working when it expires, when
the worker's token is rotated or the worker deactivated (the generation moves on), whichever comes first. The app
keeps it in a cookie of the browser's tab (never in the URL).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

from vhmine.curate.base import WorkerInfo, checked_worker
from vhmine.errors import AuthError
from vhmine.store import Store, Worker

TICKET_S = 12 * 3600  # a working day: a ticket outlives no shift


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _signature(w: Worker, payload: str) -> str:
    key = hashlib.sha256(b"vhmine session ticket\0" + w.token_hash.encode("ascii")).digest()
    return _b64(hmac.new(key, payload.encode("ascii"), hashlib.sha256).digest())


def session_ticket(store: Store, me: WorkerInfo, *, ttl_s: float = TICKET_S, now: float | None = None) -> str:
    """A ticket for the signed-in `me`, good for `ttl_s` seconds (unless their token is rotated first)."""
    expires = int((time.time() if now is None else now) + ttl_s)
    with store.session(write=False) as s:
        w = checked_worker(s, me)
        payload = _b64(json.dumps([w.name, w.token_generation, expires]).encode("utf-8"))
        return f"{payload}.{_signature(w, payload)}"


def resume_session(store: Store, ticket: str, *, now: float | None = None) -> WorkerInfo:
    """The worker a ticket signs in, as the store has them now; AuthError (saying why) when it is malformed, forged,
    expired, or its worker's token was rotated or the worker deactivated since."""
    payload, _, signature = (ticket if isinstance(ticket, str) else "").partition(".")
    try:
        name, generation, expires = json.loads(_unb64(payload))
        if not (isinstance(name, str) and isinstance(generation, int) and isinstance(expires, int)):
            raise ValueError(payload)
    except (ValueError, TypeError, UnicodeDecodeError):
        raise AuthError("the saved session is not one this app wrote: sign in with your token") from None
    with store.session(write=False) as s:
        w = s.get(Worker, name)
        if w is None or not hmac.compare_digest(_signature(w, payload), signature):
            raise AuthError("the saved session is not one this app wrote: sign in with your token")
        if (time.time() if now is None else now) >= expires:
            raise AuthError("your session has ended (it lasts 12 hours at most): sign in with your token again")
        # a rotated token or a deactivation: checked_worker's own words
        me = checked_worker(s, WorkerInfo(name, w.is_admin, w.active, generation))
        return WorkerInfo(me.name, me.is_admin, me.active, me.token_generation)
