"""Session tickets (curate.people.tickets): a ticket signs its worker in again until it expires, and not after their
token is rotated or they are deactivated; a changed byte, another worker's name or a later expiry is refused; the
ticket holds neither the token nor its hash."""

from __future__ import annotations

import base64
import json

import pytest
from helpers import seed_store

from vhmine import curate as C
from vhmine.errors import AuthError


@pytest.fixture
def signed(tmp_path):
    store, tokens = seed_store(tmp_path / "t.db", tmp_path)
    me = C.sign_in(store, tokens["alice"])
    yield store, tokens, me
    store.close()


def test_a_ticket_signs_its_worker_in_again_until_it_expires(signed):
    store, tokens, me = signed
    ticket = C.people.session_ticket(store, me, ttl_s=3600, now=1_000_000)
    assert C.people.resume_session(store, ticket, now=1_000_000 + 3599) == me
    with pytest.raises(AuthError, match="session has ended"):
        C.people.resume_session(store, ticket, now=1_000_000 + 3600)
    assert tokens["alice"] not in ticket
    with store.session(write=False) as s:
        from vhmine.store import Worker

        assert s.get(Worker, "alice").token_hash not in ticket


@pytest.mark.parametrize("how", ["rotate", "deactivate"])
def test_a_rotated_token_or_a_deactivation_ends_every_ticket(signed, how):
    store, _tokens, me = signed
    ticket = C.people.session_ticket(store, me)
    if how == "rotate":
        C.people.rotate_token(store, "alice")
    else:
        C.people.deactivate_worker(store, "alice")
    with pytest.raises(AuthError):
        C.people.resume_session(store, ticket)


def _forged(ticket: str, **change) -> str:
    payload, _, sig = ticket.partition(".")
    name, generation, expires = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    fields = {"name": name, "generation": generation, "expires": expires, **change}
    raw = json.dumps([fields["name"], fields["generation"], fields["expires"]]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=") + "." + sig


def test_a_changed_ticket_is_refused(signed):
    store, _tokens, me = signed
    ticket = C.people.session_ticket(store, me, ttl_s=60)
    for bad in (
        _forged(ticket, name="bob"),  # another worker, the same signature
        _forged(ticket, expires=2**40),  # a later expiry
        ticket[:-2] + ("AA" if not ticket.endswith("AA") else "BB"),  # the signature touched
        "",
        "not a ticket",
        "x.y",
    ):
        with pytest.raises(AuthError, match="not one this app wrote"):
            C.people.resume_session(store, bad)
