"""Near duplicates a worker can see and overrule: the pairs `vhmine export`'s check found (vhmine.export.neardup).

Reads and writes the `near_duplicates` table (vhmine.store.NearDuplicate). `record_near_duplicates` is
what export calls: it stores each pair found, with the encoders and thresholds that decided it, under an
id derived from the pair (so the next export finds the same row and any overrule on it), and returns the
overrules. `near_duplicate_list` shows the pairs to a worker, a page at a time (`near_duplicate_count` says how
many); `overrule_near_duplicate` records who overruled one, when and why (the images are different enough, or the
match is harmless), and `reinstate_near_duplicate` takes that back. Any active worker may do either, as with blind
flags.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass

from sqlalchemy import func, select

from vhmine.curate.base import WorkerInfo, checked_worker
from vhmine.errors import FormError, InputError
from vhmine.store import (
    NearDuplicate,
    Store,
    utcnow,
)

SCOPES = ("within", "reference", "generated")


def near_duplicate_id(scope: str, a_image: str, b_index: str | None, b_image: str) -> str:
    """The stable id of a pair: the same scope and images give the same id in every export."""
    key = f"{scope}\0{a_image}\0{b_index or ''}\0{b_image}"
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Overrule:
    by: str
    at: dt.datetime
    reason: str


def record_near_duplicates(
    store: Store, found: list[dict], *, encoders: dict, thresholds: dict
) -> dict[str, Overrule | None]:
    """Store the pairs of one check. `found`: {"scope", "a_image", "a_sha256", "b_index", "b_image", "b_sha256",
    "b_path", "clip", "dino", "exact"}. Returns pair id -> its overrule (None when it counts)."""
    out: dict[str, Overrule | None] = {}
    now = utcnow()
    with store.session() as s:
        for f in found:
            if f["scope"] not in SCOPES:
                raise InputError(f"near duplicate scope {f['scope']!r} is not one of {', '.join(SCOPES)}")
            pid = near_duplicate_id(f["scope"], f["a_image"], f.get("b_index"), f["b_image"])
            row = s.get(NearDuplicate, pid)
            if row is None:
                row = NearDuplicate(
                    id=pid,
                    scope=f["scope"],
                    a_image=f["a_image"],
                    b_index=f.get("b_index"),
                    b_image=f["b_image"],
                    created_at=now,
                )
                s.add(row)
            row.a_sha256, row.b_sha256, row.b_path = f.get("a_sha256"), f.get("b_sha256"), f.get("b_path")
            row.clip, row.dino, row.exact = float(f["clip"]), float(f["dino"]), bool(f["exact"])
            row.encoders, row.thresholds, row.seen_at = encoders, thresholds, now
            out[pid] = (
                Overrule(row.overruled_by, row.overruled_at, row.overrule_reason or "") if row.overruled_by else None
            )
    return out


@dataclass(frozen=True)
class NearDuplicateView:
    """One pair as a worker sees it: both images, both cosines, what decided it and any overrule."""

    id: str
    scope: str
    a_image: str
    b_index: str | None
    b_image: str
    b_path: str | None
    clip: float
    dino: float
    exact: bool
    encoders: dict
    thresholds: dict
    seen_at: dt.datetime
    overruled_by: str | None = None
    overruled_at: dt.datetime | None = None
    overrule_reason: str | None = None

    @property
    def overruled(self) -> bool:
        return self.overruled_by is not None


def near_duplicate_count(store: Store, worker: str | WorkerInfo) -> tuple[int, int]:
    """(pairs, of which overruled): what near_duplicate_list pages through, counted in one query."""
    with store.session(write=False) as s:
        checked_worker(s, worker)
        pairs, overruled = s.execute(select(func.count(), func.count(NearDuplicate.overruled_by))).one()
    return pairs, overruled


def near_duplicate_list(
    store: Store,
    worker: str | WorkerInfo,
    *,
    include_overruled: bool = True,
    offset: int = 0,
    limit: int | None = None,
) -> list[NearDuplicateView]:
    """Every recorded pair, most similar first, for a worker to look through; `offset` and `limit`: one page of them
    (the app's Blind flags page shows a page at a time: all 63 pairs of a store took it 4 s to draw)."""
    with store.session(write=False) as s:
        checked_worker(s, worker)
        q = select(NearDuplicate)
        if not include_overruled:
            q = q.where(NearDuplicate.overruled_by.is_(None))
        q = q.order_by(NearDuplicate.clip.desc(), NearDuplicate.dino.desc(), NearDuplicate.id)
        rows = s.scalars(q.offset(offset).limit(limit)).all()
        return [
            NearDuplicateView(
                r.id,
                r.scope,
                r.a_image,
                r.b_index,
                r.b_image,
                r.b_path,
                r.clip,
                r.dino,
                r.exact,
                dict(r.encoders or {}),
                dict(r.thresholds or {}),
                r.seen_at,
                r.overruled_by,
                r.overruled_at,
                r.overrule_reason,
            )
            for r in rows
        ]


def _row(s, dup_id: str) -> NearDuplicate:
    row = s.get(NearDuplicate, dup_id)
    if row is None:
        raise InputError(
            f"no near duplicate {dup_id!r} in the store (see the app's list, or the manifest's near_duplicates ids)"
        )
    return row


def overrule_near_duplicate(store: Store, worker: str | WorkerInfo, dup_id: str, reason: str) -> None:
    """A worker's judgement that the pair is not a problem: it stays on record with who overruled it,
    when and why, and the next export lists it as overruled."""
    reason = (reason or "").strip()
    if not reason:
        raise FormError(
            "reason",
            "say why the pair is not a problem (e.g. 'different scenes from one camera; the questions differ')",
        )
    with store.session() as s:
        name = checked_worker(s, worker).name
        row = _row(s, dup_id)
        row.overruled_by, row.overruled_at, row.overrule_reason = name, utcnow(), reason


def reinstate_near_duplicate(store: Store, worker: str | WorkerInfo, dup_id: str) -> None:
    """Take an overrule back: the pair counts as a near duplicate again."""
    with store.session() as s:
        checked_worker(s, worker)
        row = _row(s, dup_id)
        row.overruled_by, row.overruled_at, row.overrule_reason = None, None, None
