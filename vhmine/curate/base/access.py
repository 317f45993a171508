"""Who may act: the signed-in `WorkerInfo` the app passes to every call, and the checks every call makes.

Reads the `workers` table (active, admin, token generation) of the curation store; writes nothing. A bare
name is a caller that holds the store itself (CLI, scripts); a signed-in WorkerInfo must also still hold the
token generation it signed in with, so a rotated token or a deactivation ends a session at its next action.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from vhmine.errors import AuthError
from vhmine.store import Worker


@dataclass(frozen=True)
class WorkerInfo:
    """A worker as signed in: `generation` is the worker's token generation at sign-in."""

    name: str
    is_admin: bool
    active: bool
    generation: int = 0


def checked_worker(s: Session, who: str | WorkerInfo, *, admin: bool = False) -> Worker:
    """The worker row of `who`, checked on every call: active, an admin when `admin`, and, for a
    signed-in WorkerInfo, still on the token it signed in with (a rotated token or a deactivation
    bumps the generation). A bare name is a caller that holds the store itself (CLI, scripts)."""
    name = who if isinstance(who, str) else who.name
    w = s.get(Worker, name)
    if w is None or not w.active:
        raise AuthError(f"worker {name!r} is unknown or inactive: sign in again")
    if isinstance(who, WorkerInfo) and who.generation != w.token_generation:
        raise AuthError(
            f"the sign-in of {name!r} is no longer valid (the token was replaced or the worker "
            "deactivated): nothing saved; sign in again with the current token"
        )
    if admin and not w.is_admin:
        raise AuthError(f"worker {name!r} is not an admin: ask an admin (`vhmine workers add NAME --admin`)")
    return w


def check_admin(s: Session, by: str | WorkerInfo | None) -> None:
    """Admin actions: `by` is the signed-in worker asking, who must be an admin; None is the store's
    operator (the CLI), who holds the database itself."""
    if by is not None:
        checked_worker(s, by, admin=True)
