"""Workers: registering them (`vhmine workers add`), listing, rotating their token, deactivating and
reactivating them, signing in with a token, and the mode each last chose in the app.

Reads and writes the `workers` table of the curation store. A new or rotated token is returned once;
only its sha256 is kept, and a failed sign-in never repeats the token. Rotating or deactivating bumps
the worker's token generation, which every signed-in session carries (`WorkerInfo.generation`) and
every library call compares (`curate.base.access.checked_worker`): the old token and every browser signed in with it
stop working at their next action.
"""

from __future__ import annotations

import hashlib
import re
import secrets

from sqlalchemy import select
from sqlalchemy.orm import Session

from vhmine.curate.base import WorkerInfo, check_admin, checked_worker
from vhmine.errors import AuthError, InputError
from vhmine.store import (
    Store,
    Worker,
    utcnow,
)

# Starts and ends with a letter or digit, so a name in a sentence is one token ("by ann." is ann).
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9])?$")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _new_token() -> str:
    return "vhm_" + secrets.token_urlsafe(32)


def _info(w: Worker) -> WorkerInfo:
    return WorkerInfo(w.name, w.is_admin, w.active, w.token_generation)


def add_worker(store: Store, name: str, *, admin: bool = False, by: WorkerInfo | str | None = None) -> str:
    """Register a worker and return their sign-in token; only its hash is kept, so show it once.

    `by` (here and in the other admin functions below): the signed-in worker asking, who must be an
    admin; None only for the store's operator (the CLI), who holds the database itself.
    """
    if not _NAME.match(name or ""):
        raise InputError(
            f"worker name {name!r} is not allowed: use 1-64 letters, digits, '.', '_' or '-', "
            "starting and ending with a letter or digit"
        )
    token = _new_token()
    with store.session() as s:
        check_admin(s, by)
        if s.get(Worker, name) is not None:
            raise InputError(f"worker {name!r} already exists in {store.display_url}: choose another name")
        s.add(
            Worker(
                name=name,
                token_hash=hash_token(token),
                is_admin=admin,
                active=True,
                created_at=utcnow(),
                token_generation=0,
            )
        )
    return token


def list_workers(store: Store, *, by: WorkerInfo | str | None = None) -> list[WorkerInfo]:
    with store.session(write=False) as s:
        check_admin(s, by)
        return [_info(w) for w in s.scalars(select(Worker).order_by(Worker.name))]


def chosen_mode(store: Store, worker: str | WorkerInfo) -> str | None:
    """The mode `worker` last chose in the app (kept across sign-ins and browsers), or None."""
    from vhmine import rules as R

    with store.session(write=False) as s:
        mode = checked_worker(s, worker).mode
    return mode if mode in R.mode_names() else None  # a mode no longer offered: the first one


def choose_mode(store: Store, worker: str | WorkerInfo, mode: str) -> None:
    """Remember `mode` as the one `worker` works in (the app's mode menu)."""
    from vhmine import rules as R

    mode = R.get_mode(mode).name
    with store.session() as s:
        w = checked_worker(s, worker)
        if w.mode != mode:
            w.mode = mode


def _named(s: Session, store: Store, name: str) -> Worker:
    w = s.get(Worker, name, with_for_update=True)
    if w is None:
        raise InputError(f"no worker {name!r} in {store.display_url}: `vhmine workers list` shows them")
    return w


def rotate_token(store: Store, name: str, *, by: WorkerInfo | str | None = None) -> str:
    """Give a worker a new token and return it (shown once); the old token and every session signed
    in with it stop working at once."""
    token = _new_token()
    with store.session() as s:
        check_admin(s, by)
        w = _named(s, store, name)
        w.token_hash, w.token_generation = hash_token(token), w.token_generation + 1
    return token


def deactivate_worker(store: Store, name: str, *, by: WorkerInfo | str | None = None) -> None:
    """Stop a worker: their token no longer signs in and their signed-in sessions end at their next action.
    Nothing they saved is touched; their leases lapse as usual."""
    with store.session() as s:
        check_admin(s, by)
        w = _named(s, store, name)
        w.active, w.token_generation = False, w.token_generation + 1


def activate_worker(store: Store, name: str, *, by: WorkerInfo | str | None = None) -> None:
    """Let a deactivated worker sign in again with their token (sessions from before stay ended)."""
    with store.session() as s:
        check_admin(s, by)
        _named(s, store, name).active = True


def sign_in(store: Store, token: str) -> WorkerInfo:
    """The worker whose token this is; AuthError (which never repeats the token) otherwise."""
    token = (token or "").strip()
    with store.session(write=False) as s:
        w = s.scalar(select(Worker).where(Worker.token_hash == hash_token(token))) if token else None
        if w is None or not w.active:
            raise AuthError("unknown or inactive token: ask an admin for one (`vhmine workers add NAME`)")
        return _info(w)


def check_session(store: Store, me: WorkerInfo) -> WorkerInfo:
    """`me` as the store has them now (admin flag included); AuthError when the worker was deactivated
    or their token rotated since they signed in. The app calls it on every page run."""
    with store.session(write=False) as s:
        return _info(checked_worker(s, me))
