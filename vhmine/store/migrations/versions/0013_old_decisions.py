"""What stores written before revision 0011 lack, read back from their action log: the truths admins decided
and the yes/no questions re-derivation set aside, so that the decisions there weigh as on a store made at head.

- A truth fact (`truth_fact`, curate.decisions.errata) on each yes/no question drafted from an open one whose truth
  an accepted erratum flipped, where the question still holds that truth: {"truth", "by": "erratum <flag>",
  "source": the open question's answers when the admin decided} (from the log: the answers the next accepted
  erratum on that open question started from, else its answers now). A later erratum on the open question then
  queues a contradiction for a person instead of flipping the truth back.
- `retired_from` on each yes/no question that derivation set aside (curate.decisions.derived: an accepted erratum's
  derived entries changing its status to discarded, or a draft it created, discarded by the undo of the erratum),
  where the question is still discarded with that very reason: the status it had, so an erratum that brings its
  source back brings it back.
- `draft_value` on each yes/no question drafted before ids were derived (its id is not the one curate.base.ids
  derives from its source and the question it was drafted as) that a worker confirmed in her own words: the value it
  was drafted to test, from the confirm action's record of the draft (curate.decisions.drafts keeps it so since),
  so that re-derivation finds it by that value and does not draft it again, as it finds a newer one by its id.

Errata actions written before 0011 are read (theirs lack the "fact" key and `retired_from` changes); what people
discarded stays theirs; ids and everything else stay as they are. The downgrade keeps the backfilled values
(valid at 0012).

Revision ID: 0013
Revises: 0012
"""

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_I = sa.table(
    "instances",
    sa.column("id"),
    sa.column("kind"),
    sa.column("status"),
    sa.column("truth", sa.Boolean),
    sa.column("answers", sa.JSON),
    sa.column("derived_from"),
    sa.column("discard_reason"),
    sa.column("retired_from"),
    sa.column("template_id"),
    sa.column("draft_value"),
    sa.column("truth_fact", sa.JSON(none_as_null=True)),
)
_A = sa.table("actions", sa.column("id"), sa.column("kind"), sa.column("payload", sa.JSON), sa.column("undone_at"))


def _old_accepts(conn) -> list[tuple[int, dict, bool]]:
    """(action id, payload, undone) of the accepted errata written before 0011, oldest first."""
    rows = conn.execute(sa.select(_A.c.id, _A.c.payload, _A.c.undone_at).where(_A.c.kind == "errata_accept"))
    out = []
    for aid, p, undone in sorted(rows, key=lambda r: r[0]):
        p = p or {}
        if "fact" in p or "contradiction" in p:
            continue  # written at 0011 or later: it recorded its facts itself
        if any("retired_from" in (e.get("changes") or {}) for e in p.get("derived") or []):
            continue
        out.append((aid, p, undone is not None))
    return out


def _truths(accepts, inst) -> dict[str, dict]:
    """id -> the fact to record, for each yes/no question whose last truth change was an erratum on it."""
    last: dict[str, tuple[int, object]] = {}  # id -> (position, the erratum's payload, or None: derivation's change)
    answers_from: dict[str, list[tuple[int, list]]] = {}  # open question -> [(position, answers before)]
    for k, (_aid, p, undone) in enumerate(accepts):
        if undone:
            continue
        ch = p.get("changes") or {}
        iid = p.get("instance_id")
        if "truth" in ch:
            last[iid] = (k, p)
        if "answers" in ch:
            answers_from.setdefault(iid, []).append((k, ch["answers"][0]))
        for e in p.get("derived") or []:
            if e.get("table") == "instances" and "truth" in (e.get("changes") or {}):
                last[e["id"]] = (k, None)
    out = {}
    for iid, (k, p) in last.items():
        row = inst.get(iid)
        if p is None or row is None or row.derived_from is None or row.truth_fact is not None:
            continue
        new = p["changes"]["truth"][1]
        if bool(row.truth) != bool(new):
            continue
        src = inst.get(row.derived_from)
        later = [a for j, a in answers_from.get(row.derived_from, []) if j > k]
        source = later[0] if later else (src.answers if src is not None else None)
        out[iid] = {"truth": bool(new), "by": f"erratum {p.get('flag_id')}", "source": list(source or [])}
    return out


def _retired(accepts, inst) -> dict[str, str]:
    """id -> the status derivation set the yes/no question aside from, where it still lies so set aside."""
    last: dict[str, tuple[str, str]] = {}  # id -> (status it had, the reason derivation gave)
    for _aid, p, undone in accepts:
        flag = p.get("flag_id")
        for e in p.get("derived") or []:
            if e.get("table") != "instances":
                continue
            ch = e.get("changes") or {}
            if undone and "created" in e:  # the undo discarded the draft it had made
                last[e["id"]] = ("draft", f"erratum {flag} undone")
            elif not undone and ch.get("status", [None, None])[1] == "discarded":
                reason = (ch.get("discard_reason") or [None, None])[1]
                last[e["id"]] = (ch["status"][0], reason)
    out = {}
    for iid, (was, reason) in last.items():
        row = inst.get(iid)
        if (
            row is not None
            and row.derived_from is not None
            and row.status == "discarded"
            and row.retired_from is None
            and row.discard_reason == reason
            and was in ("ready", "draft")
        ):
            out[iid] = was
    return out


def _derived_id(source_id: str, question: str) -> str:  # curate.base.ids.derived_id, as of this revision
    key = " ".join(question.lower().split()).rstrip("?. ")
    return hashlib.sha256(f"{source_id}\n{key}".encode()).hexdigest()[:16]


def _values(conn, inst) -> dict[str, str]:
    """id -> the value an own-worded yes/no question drafted before 0011 was drafted to test."""
    rows = conn.execute(sa.select(_A.c.id, _A.c.payload).where(_A.c.kind == "confirm", _A.c.undone_at.is_(None)))
    out = {}
    for _aid, p in sorted(rows, key=lambda r: r[0]):
        for d in (p or {}).get("drafts") or []:
            row = inst.get(d.get("id"))
            if (
                row is not None
                and row.derived_from is not None
                and row.template_id.endswith(".own")
                and row.draft_value is None
                and d.get("draft_value") is not None
                and d.get("question")
                and row.id != _derived_id(row.derived_from, d["question"])
            ):
                out[row.id] = d["draft_value"]
    return out


def upgrade() -> None:
    conn = op.get_bind()
    inst = {r.id: r for r in conn.execute(sa.select(_I))}
    for iid, value in sorted(_values(conn, inst).items()):
        conn.execute(sa.update(_I).where(_I.c.id == iid).values(draft_value=value))
    accepts = _old_accepts(conn)
    for iid, fact in sorted(_truths(accepts, inst).items()):
        conn.execute(sa.update(_I).where(_I.c.id == iid).values(truth_fact=fact))
    for iid, was in sorted(_retired(accepts, inst).items()):
        conn.execute(sa.update(_I).where(_I.c.id == iid).values(retired_from=was))


def downgrade() -> None:
    pass  # what it recorded (facts, retired_from, tested values) is valid at 0012: kept
