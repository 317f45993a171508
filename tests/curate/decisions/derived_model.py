"""The plain model the derived-state property checks the store against (derived_machine.DerivedMachine), and the
small helpers its tests share: none of it calls the code under test to decide what must hold.

`PlainModel` derives from scratch, from the open questions' answers the test set and the facts people decided in
the test (confirmed, rejected or removed, truths decided with the answers they were decided against), which
drafted yes/no questions must be live with which id, status and truth, and which must wait in the person-queue.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path


def expected_id(source_id: str, question: str) -> str:
    """The spec of a drafted question's id: a function of its source and its question, nothing else."""
    key = " ".join(question.lower().split()).rstrip("?. ")
    return hashlib.sha256(f"{source_id}\n{key}".encode()).hexdigest()[:16]


def norm(answers) -> set:
    from vhmine.rules.modes import normalize_answer

    return {normalize_answer(a) for a in answers or ()}


def snapshot(store) -> dict:
    """Every row a curation action can change, as plain values."""
    from vhmine.store import Action, BlindAnswer, Erratum, Instance, Response, ResponseLabel

    with store.session(write=False) as s:
        return {
            "instances": {
                i.id: (
                    i.status,
                    i.truth,
                    tuple(i.answers),
                    i.question,
                    i.retired_from,
                    json.dumps(i.truth_fact),
                    json.dumps(i.contradiction),
                    i.discard_reason,
                )
                for i in s.query(Instance)
            },
            "labels": {(r.response_id, r.worker): r.verdict for r in s.query(ResponseLabel)},
            "responses": {r.id: (r.verdict, r.judge) for r in s.query(Response)},
            "blind": {b.id: (b.correct, json.dumps(b.reference), b.flag_id) for b in s.query(BlindAnswer)},
            "errata": {e.id: e.status for e in s.query(Erratum)},
            "undone": {a.id: a.undone_at is not None for a in s.query(Action)},
        }


class PlainModel:
    """Mixed into the machine: reads `self.store` (the sources' rows) and the model's `source`, `confirmed`,
    `rejected`, `facts` and `own`."""

    def expected(self) -> dict[str, tuple]:
        """id -> (status, truth) of every drafted yes/no question that must be live (ready or draft) now."""
        from vhmine.bench import question_key
        from vhmine.rules import modes as M
        from vhmine.store import Instance

        out = {}
        with self.store.session(write=False) as s:
            oeqs = {o.id: o for o in s.query(Instance).filter_by(kind="OEQ")}
            rows = s.query(Instance).filter(Instance.derived_from.is_not(None)).all()
        for oid, src in self.source.items():
            if not src["ready"]:
                continue
            o = oeqs[oid]
            others = [
                a
                for x in oeqs.values()
                if x.id != oid
                and x.task_id == o.task_id
                and self.source[x.id]["ready"]
                and question_key(x.question) == question_key(o.question)
                for a in self.source[x.id]["answers"]
            ]
            mode = M.get_mode(o.mode)
            fresh = M.draft_ynq(mode, mode.template(o.template_id), o.slots, src["answers"], others)
            ids = {expected_id(oid, n.question): n for n in fresh}
            for iid, n in ids.items():
                if iid in self.rejected:
                    continue
                out[iid] = (
                    "ready" if iid in self.confirmed else "draft",
                    self.facts[iid]["truth"] if iid in self.facts else n.truth,
                )
            for r in rows:  # a person's truth stands though no drafting makes it (own wording, a readable flip)
                if r.derived_from == oid and r.id in self.facts and r.id not in self.rejected:
                    out[r.id] = ("ready", self.facts[r.id]["truth"])
        return out

    def queued(self) -> set[str]:
        """The questions whose person's truth the answers now contradict (the issue's rule, written plainly)."""
        from vhmine.store import Instance

        out = set()
        with self.store.session(write=False) as s:
            rows = {i.id: i for i in s.query(Instance).filter(Instance.id.in_(sorted(self.facts)))}
        for iid, f in self.facts.items():
            r = rows[iid]
            src = self.source[r.derived_from]
            if not src["ready"] or iid in self.rejected or norm(src["answers"]) == norm(f["source"]):
                continue
            if iid in self.own or r.draft_value is None:
                if not (f["truth"] and norm(f["source"]) <= norm(src["answers"])):
                    out.add(iid)
            else:
                implied = norm([r.draft_value]) <= norm(src["answers"])
                if implied != f["truth"] and implied != f.get("seen"):
                    out.add(iid)
        return out


def color_questions(store):
    """{(image role, question): record} of the ready color instances of helpers.make_ready_store; A: the image
    answered "red" at first (or "red" and an alias since)."""
    from vhmine import curate as C

    recs = C.ready_instances(store, "color", locate=False)
    a = next(r for r in recs if r.kind == "OEQ" and r.answers[0] == "red").image_id
    return {("A" if r.image_id == a else "B", r.question): r for r in recs}


def erratum(store, iid, **fix) -> str:
    """bob flags the item, carol accepts the flag with `fix` (answers=, truth= or remove=); returns the flag's id."""
    from vhmine import curate as C

    fid = C.decisions.flag_instance(store, "bob", iid, "wrong")
    C.decisions.accept_erratum(store, "carol", fid, **fix)
    return fid


def fresh_copy(base: Path, folder: Path):
    """A callable returning a fresh copy of the SQLite store at `base`, one per example, under `folder`."""
    import itertools
    import shutil

    from vhmine.store import open_store

    n = itertools.count()

    def make():
        path = folder / f"store{next(n)}.db"
        shutil.copy(base, path)
        return open_store(path)

    return make
