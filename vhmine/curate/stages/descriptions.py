"""Mode descriptions (written by describe, read by generate) in the curation store.

Reads and writes `descriptions` rows: the per-example analyses and the merged description of each
mode, with the model, whether hypothetical examples went in, and their sources (instances, responses,
prompt ids). A description's id is its answer's cache key, so writing one twice keeps the first.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select

from vhmine.store import (
    Description,
    Store,
    utcnow,
)


def add_description(
    store: Store, did: str, mode: str, kind: str, text: str, model: str, hypothetical: bool, sources: list[str]
) -> None:
    with store.session() as s:
        if s.get(Description, did) is None:
            s.add(
                Description(
                    id=did,
                    mode=mode,
                    kind=kind,
                    text=text,
                    model=model,
                    hypothetical=hypothetical,
                    sources=sources,
                    created_at=utcnow(),
                )
            )


def description_texts(store: Store, ids: Sequence[str]) -> dict[str, str]:
    """description id -> its text, for the ids the store holds."""
    if not ids:
        return {}
    with store.session(write=False) as s:
        return dict(s.execute(select(Description.id, Description.text).where(Description.id.in_(list(ids)))).all())


def latest_descriptions(store: Store, modes: Sequence[str]) -> dict[str, tuple[str, str]]:
    """mode -> (description id, text) of its newest merged description (ties broken by id)."""
    out: dict[str, tuple[str, str]] = {}
    with store.session(write=False) as s:
        rows = (
            s.execute(
                select(Description)
                .where(Description.kind == "merged", Description.mode.in_(list(modes)))
                .order_by(Description.created_at, Description.id)
            )
            .scalars()
            .all()
        )
        for d in rows:
            out[d.mode] = (d.id, d.text)
    return out
