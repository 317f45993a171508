"""Workers: registering them (`vhmine workers add`), listing them, and signing in with a token.

Reads and writes the `workers` table of the curation store. A new worker's token is returned once;
only its sha256 is kept, and a failed sign-in never repeats the token.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

from ..errors import AuthError, InputError
from ..store import (  # first: it says which extra to install when SQLAlchemy is missing
    Store, Worker, utcnow,
)

from sqlalchemy import select  # noqa: E402

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class WorkerInfo:
    name: str
    is_admin: bool
    active: bool


def add_worker(store: Store, name: str, *, admin: bool = False) -> str:
    """Register a worker and return their sign-in token; only its hash is kept, so show it once."""
    if not _NAME.match(name or ""):
        raise InputError(f"worker name {name!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    token = "vhm_" + secrets.token_urlsafe(32)
    with store.session() as s:
        if s.get(Worker, name) is not None:
            raise InputError(f"worker {name!r} already exists in {store.display_url}: choose another name")
        s.add(Worker(name=name, token_hash=hash_token(token), is_admin=admin, active=True, created_at=utcnow()))
    return token


def list_workers(store: Store) -> list[WorkerInfo]:
    with store.session(write=False) as s:
        return [WorkerInfo(w.name, w.is_admin, w.active) for w in s.scalars(select(Worker).order_by(Worker.name))]


def sign_in(store: Store, token: str) -> WorkerInfo:
    """The worker whose token this is; AuthError (which never repeats the token) otherwise."""
    token = (token or "").strip()
    with store.session(write=False) as s:
        w = s.scalar(select(Worker).where(Worker.token_hash == hash_token(token))) if token else None
        if w is None or not w.active:
            raise AuthError("unknown or inactive token: ask an admin for one (`vhmine workers add NAME`)")
        return WorkerInfo(w.name, w.is_admin, w.active)
