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

Errata actions written before 0011 are read (theirs lack the "fact" key and `retired_from` changes), and each one
whose decision is backfilled gets in its payload what the code records since ("fact" and "contradiction"; the
derived entry's "retired_from"), so that undoing it takes the backfilled values back as it would at head. What
people discarded stays theirs; ids and everything else stay as they are. The downgrade keeps what it recorded
(valid at 0012) and how far it read the log (vhmine.store.migrations.kept): taken down and up again, the upgrade
reads only the actions logged since (by code before 0011, where the store went below it), as the earlier ones were
read once and what they decided is kept (0011's downgrade).

Revision ID: 0013
Revises: 0012
"""

import hashlib
import json

import sqlalchemy as sa
from alembic import op

from vhmine.store.migrations import keep, take

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


def _old_accepts(conn, after: int) -> list[tuple[int, dict, bool]]:
    """(action id, payload, undone) of the accepted errata written before 0011 (after action `after`), oldest first."""
    where = (_A.c.kind == "errata_accept") & (_A.c.id > after)
    rows = conn.execute(sa.select(_A.c.id, _A.c.payload, _A.c.undone_at).where(where))
    out = []
    for aid, p, undone in sorted(rows, key=lambda r: r[0]):
        p = p or {}
        if "fact" in p or "contradiction" in p:
            continue  # written at 0011 or later: it recorded its facts itself
        if any("retired_from" in (e.get("changes") or {}) for e in p.get("derived") or []):
            continue
        out.append((aid, p, undone is not None))
    return out


def _truths(accepts, inst) -> tuple[dict[str, dict], dict[int, dict]]:
    """The facts to record: (id -> fact, for each yes/no question whose last truth change was an erratum on it;
    action id -> the "fact" and "contradiction" its payload gets, as curate.decisions.errata writes them since, so
    that undoing the erratum takes its fact back too)."""
    events: dict[str, list[tuple[int, int, dict | None]]] = {}  # id -> [(position, action, payload; None: derived)]
    answers_from: dict[str, list[tuple[int, list]]] = {}  # open question -> [(position, answers before)]
    for k, (aid, p, undone) in enumerate(accepts):
        if undone:
            continue
        ch = p.get("changes") or {}
        iid = p.get("instance_id")
        if "truth" in ch:
            events.setdefault(iid, []).append((k, aid, p))
        if "answers" in ch:
            answers_from.setdefault(iid, []).append((k, ch["answers"][0]))
        for e in p.get("derived") or []:
            if e.get("table") == "instances" and "truth" in (e.get("changes") or {}):
                events.setdefault(e["id"], []).append((k, aid, None))
    facts, payloads = {}, {}
    for iid, evs in events.items():
        row = inst.get(iid)
        if row is None or row.derived_from is None or row.truth_fact is not None or evs[-1][2] is None:
            continue  # not drafted, a fact already, or derivation changed it last (the old code overwrote it)
        if bool(row.truth) != bool(evs[-1][2]["changes"]["truth"][1]):
            continue
        src, prev, edits = inst.get(row.derived_from), None, {}
        for k, aid, p in evs:
            if p is None:
                continue
            later = [a for j, a in answers_from.get(row.derived_from, []) if j > k]
            source = later[0] if later else (src.answers if src is not None else None)
            fact = {"truth": bool(p["changes"]["truth"][1]), "by": f"erratum {p.get('flag_id')}"}
            fact["source"] = list(source or [])
            edits[aid] = {"fact": [prev, fact], "contradiction": [None, None]}
            prev = fact
        facts[iid] = prev
        payloads.update(edits)
    return facts, payloads


def _retired(accepts, inst) -> tuple[dict[str, str], dict[int, list[tuple[int, str]]]]:
    """(id -> the status derivation set the yes/no question aside from, where it still lies so set aside; action id
    -> [(its derived entry, status)] whose changes get "retired_from", as curate.decisions.derived records it since,
    so that undoing the erratum takes it back too)."""
    last: dict[str, tuple[str, str, int, int | None]] = {}  # id -> (status it had, reason, action, entry)
    for aid, p, undone in accepts:
        flag = p.get("flag_id")
        for n, e in enumerate(p.get("derived") or []):
            if e.get("table") != "instances":
                continue
            ch = e.get("changes") or {}
            if undone and "created" in e:  # the undo discarded the draft it had made
                last[e["id"]] = ("draft", f"erratum {flag} undone", aid, None)
            elif not undone and ch.get("status", [None, None])[1] == "discarded":
                reason = (ch.get("discard_reason") or [None, None])[1]
                last[e["id"]] = (ch["status"][0], reason, aid, n)
    out, entries = {}, {}
    for iid, (was, reason, aid, n) in last.items():
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
            if n is not None:
                entries.setdefault(aid, []).append((n, was))
    return out, entries


def _derived_id(source_id: str, question: str) -> str:  # curate.base.ids.derived_id, as of this revision
    key = " ".join(question.lower().split()).rstrip("?. ")
    return hashlib.sha256(f"{source_id}\n{key}".encode()).hexdigest()[:16]


def _values(conn, inst, after: int) -> dict[str, str]:
    """id -> the value an own-worded yes/no question drafted before 0011 was drafted to test (confirmed after action
    `after`)."""
    where = (_A.c.kind == "confirm") & _A.c.undone_at.is_(None) & (_A.c.id > after)
    rows = conn.execute(sa.select(_A.c.id, _A.c.payload).where(where))
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
    # after a downgrade, only what was logged since: the log up to there was read once, and what it read is kept
    after = max((r["up_to"] for r in take(conn, revision, "actions read")), default=0)
    inst = {r.id: r for r in conn.execute(sa.select(_I))}
    for iid, value in sorted(_values(conn, inst, after).items()):
        conn.execute(sa.update(_I).where(_I.c.id == iid).values(draft_value=value))
    accepts = _old_accepts(conn, after)
    facts, fact_edits = _truths(accepts, inst)
    retired, retired_edits = _retired(accepts, inst)
    for iid, fact in sorted(facts.items()):
        conn.execute(sa.update(_I).where(_I.c.id == iid).values(truth_fact=fact))
    for iid, was in sorted(retired.items()):
        conn.execute(sa.update(_I).where(_I.c.id == iid).values(retired_from=was))
    payload = {aid: p for aid, p, _ in accepts}
    for aid in sorted(set(fact_edits) | set(retired_edits)):
        p = json.loads(json.dumps(payload[aid]))
        p.update(fact_edits.get(aid, {}))
        for n, was in retired_edits.get(aid, []):
            p["derived"][n]["changes"]["retired_from"] = [None, was]
        conn.execute(sa.update(_A).where(_A.c.id == aid).values(payload=p))


def downgrade() -> None:
    # what it recorded (facts, retired_from, tested values) is valid at 0012: left as it is. How far the log was
    # read is kept (vhmine.store.migrations.kept), so that the upgrade back reads only what older code logs meanwhile
    conn = op.get_bind()
    up_to = conn.execute(sa.select(sa.func.max(_A.c.id))).scalar()
    if up_to is not None:
        keep(conn, revision, "actions read", [{"up_to": up_to}])
