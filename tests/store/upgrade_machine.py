"""What test_upgrade.py compares: an old store upgraded to head beside a store created at head by the same story
(tests/store/old_story.py), and the same later people's actions on both.

Reads the gzipped fixtures tests/fixtures/stores/store-<rev>.db.gz (scripts/make_store_fixtures.py); writes stores
in temporary folders. `decisions(store)` is what must match: every instance by its natural key (mode, kind, image,
question) with its status, truth, answers, discard reason, `retired_from`, truth fact and person-queue entry (ids
of rows, flags and actions, random in old eras, read as "<id>"), every task's status, and the model answers with
their verdicts and workers' labels. `UpgradeMachine` applies each action to both stores by natural key and checks
that both did the same (or refused alike) and ended alike; between actions it may take either store down to an
earlier revision and up again (`down_and_up`, issue 43), which must leave every row of it as it was (`rows`).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import sqlite3
import tempfile
from pathlib import Path

from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "stores"
REVISIONS = sorted(p.name[6:10] for p in FIXTURES.glob("store-*.db.gz"))
EARLIER = ["0001", *REVISIONS]  # where a store at head can be taken down to (and up again)
PHOTOS = ("astronaut", "coffee", "rocket")
ALIASES = {"red": "crimson", "blue": "navy", "green": "lime", "2": "3", "3": "4", "4": "5"}
NEW = {"color": ["red", "blue", "green"], "counting": ["2", "3", "4"]}
OWN = "Would you call what the picture shows here by that name, question {}?"  # no template reads it
HEX = re.compile(r"\b[0-9a-f]{16}\b")


def era(rev: str) -> dict:
    """What the story could do with the code of revision `rev`: errata from 0007, re-derivation from 0009."""
    return {"errata": rev >= "0007", "rederive": rev >= "0009"}


def _norm(v):
    if isinstance(v, str):
        return HEX.sub("<id>", v)
    if isinstance(v, list | tuple):
        return [_norm(x) for x in v]
    if isinstance(v, dict):
        return {k: _norm(x) for k, x in sorted(v.items())}
    return v


def decisions(store) -> dict:
    """The decisions that matter, keyed by what both stores share (not their random ids)."""
    from vhmine.store import Instance, Response, ResponseLabel, Task

    with store.session(write=False) as s:
        inst = sorted(
            (
                (
                    i.mode,
                    i.kind,
                    i.image_id,
                    i.question,
                    i.status,
                    i.truth,
                    tuple(i.answers),
                    i.template_id,
                    _norm(i.discard_reason),
                    i.retired_from,
                    json.dumps(_norm(i.truth_fact), sort_keys=True),
                    json.dumps(_norm(i.contradiction), sort_keys=True),
                )
                for i in s.query(Instance)
            ),
            key=repr,
        )
        tasks = sorted(((t.id, t.status, t.held_reason, _norm(t.discard_reason)) for t in s.query(Task)), key=repr)
        key = {i.id: (i.mode, i.image_id, i.question, i.status) for i in s.query(Instance)}
        answers = sorted(
            (
                key[r.instance_id],
                r.answer,
                r.verdict or "",
                r.judge or "",
                lab.worker if lab else "",
                lab.verdict if lab else "",
            )
            for r, lab in s.query(Response, ResponseLabel).outerjoin(
                ResponseLabel, ResponseLabel.response_id == Response.id
            )
        )
    return {"instances": inst, "tasks": tasks, "model answers and labels": answers}


def rows(store) -> dict:
    """Every row of every table of `store` (but Alembic's own) as vhmine reads it (JSON parsed: a JSON null and SQL
    NULL are both None), sorted: what a round trip must leave as it was."""
    from sqlalchemy import column, inspect, select, table

    with store.engine.connect() as c:
        found = inspect(c)
        names = sorted(set(found.get_table_names()) - {"alembic_version"})
        tables = [table(n, *(column(col["name"], col["type"]) for col in found.get_columns(n))) for n in names]
        return {t.name: sorted((tuple(r) for r in c.execute(select(t))), key=repr) for t in tables}


def down_and_up(store, rev: str):
    """`store` (closed) taken down to revision `rev` with Alembic's downgrade, then opened again: upgraded to head."""
    from alembic import command
    from sqlalchemy import create_engine

    from vhmine.store import open_store
    from vhmine.store.db import _alembic_config

    url = store.url
    store.close()
    engine = create_engine(url)
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, rev)
    engine.dispose()
    return open_store(url)


def unpack(rev: str, folder: Path, photos: Path) -> Path:
    """The fixture of `rev` as a SQLite file in `folder`, its images pointing at `photos` (the same bytes)."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / "store.db"
    db.write_bytes(gzip.decompress((FIXTURES / f"store-{rev}.db.gz").read_bytes()))
    with sqlite3.connect(db) as c:
        for i, path in c.execute("SELECT id, path FROM images").fetchall():
            c.execute("UPDATE images SET path = ? WHERE id = ?", (str(photos / Path(path).name), i))
    return db


def head_story(folder: Path, rev: str) -> Path:
    """The fixture's story told by today's code into `folder` (as far as the era of `rev` could tell it)."""
    from old_story import story

    story(folder, **era(rev)).close()
    return folder / "store.db"


def to_postgresql(db, url: str, rev: str) -> None:
    """The rows of the SQLite store `db` (at `rev`) copied into a PostgreSQL store made at `rev`."""
    from sqlalchemy import MetaData, create_engine, text

    from vhmine.store import open_store

    open_store(url, target=rev).close()
    src, dst = create_engine(f"sqlite:///{db}"), create_engine(url)
    meta_src, meta_dst = MetaData(), MetaData()
    meta_src.reflect(src)
    meta_dst.reflect(dst)
    with src.connect() as a, dst.begin() as b:
        for t in reversed(meta_dst.sorted_tables):  # what the migrations wrote themselves (the store's secret)
            if t.name != "alembic_version":
                b.execute(t.delete())
        for t in meta_dst.sorted_tables:
            if t.name == "alembic_version":
                continue
            rows = [dict(r._mapping) for r in a.execute(meta_src.tables[t.name].select())]
            if rows:
                b.execute(t.insert(), rows)
            if "id" in t.c and t.c.id.autoincrement is True and str(t.c.id.type) == "INTEGER":
                b.execute(
                    text(f"SELECT setval(pg_get_serial_sequence('{t.name}', 'id'), (SELECT MAX(id) FROM {t.name}))")
                )
    src.dispose(), dst.dispose()


def copy_of(db: Path):
    """A fresh copy of the store file `db`, opened (at head)."""
    from vhmine.store import open_store

    dest = Path(tempfile.mkdtemp(prefix="upgrade-", dir=db.parent.parent)) / "store.db"
    shutil.copy(db, dest)
    return open_store(dest)


# --- actions by natural key, the same on both stores ------------------------------------------------------------


def _instances(store, **where) -> list:
    from vhmine.store import Instance

    with store.session(write=False) as s:
        return sorted(s.query(Instance).filter_by(**where), key=lambda i: (i.image_id, i.question, i.status))


def _images(store, mode) -> list[str]:
    return sorted({i.image_id for i in _instances(store, mode=mode, kind="OEQ")})


def act(store, action: tuple) -> str:
    """Do `action` on `store`; returns what happened in words ("ok", or the error's class: the refusal)."""
    from vhmine import curate as C
    from vhmine.errors import FormError, InputError, LeaseError

    kind, mode, k, x = action
    try:
        if kind == "undo":
            C.undo_last(store, x)
            return "ok"
        if kind == "confirm":
            drafts = sorted(C.pending_drafts(store, "alice"), key=lambda d: (d.task_id, d.image_id, d.question))
            if not drafts:
                return "none"
            d = drafts[k % len(drafts)]
            keep, own = x
            dec = C.DraftDecision(d.instance_id, keep, question=OWN.format(k) if own else None, checked=own)
            C.confirm_drafts(store, "alice", [dec])
            return "ok"
        if kind == "resolve":
            queue = sorted(C.decisions.contradictions(store, "carol"), key=lambda c: (c.image_id, c.question))
            if not queue:
                return "none"
            C.decisions.resolve_contradiction(store, "carol", queue[k % len(queue)].instance_id, x, "decided")
            return "ok"
        image = _images(store, mode)[k % 2]
        if kind in ("alias", "answer", "remove_oeq", "reject"):
            [target] = [i for i in _instances(store, mode=mode, kind="OEQ", image_id=image) if i.status == "ready"] or [
                None
            ]
        else:
            ready = [i for i in _instances(store, mode=mode, kind="YNQ", image_id=image) if i.status == "ready"]
            target = ready[x % len(ready)] if ready else None
        if target is None:
            return "none"
        if kind == "label":  # a model answers "Yes"; bob labels the answer
            rid = C.work.add_response(store, target.id, "vlm", "Answer yes or no.", "Yes")
            C.work.label_response(store, "bob", rid, "correct" if target.truth == (x % 2 == 0) else "hallucinated")
            return "ok"
        flag = C.decisions.flag_instance(store, "bob", target.id, f"{kind} please")
        if kind == "reject":
            C.decisions.reject_erratum(store, "carol", flag, "it is right")
        elif kind == "alias":
            C.decisions.accept_erratum(
                store, "carol", flag, answers=list(target.answers) + [ALIASES[target.answers[0]]]
            )
        elif kind == "answer":
            C.decisions.accept_erratum(store, "carol", flag, answers=[NEW[mode][x % 3]])
        elif kind in ("remove_oeq", "remove_ynq"):
            C.decisions.accept_erratum(store, "carol", flag, remove=True)
        else:  # flip
            C.decisions.accept_erratum(store, "carol", flag, truth=not target.truth)
        return "ok"
    except (FormError, InputError, LeaseError) as err:
        return type(err).__name__


ACTIONS = st.one_of(
    st.tuples(
        st.sampled_from(["alias", "answer", "reject", "remove_oeq", "flip", "remove_ynq", "label"]),
        st.sampled_from(["color", "counting"]),
        st.integers(0, 1),
        st.integers(0, 3),
    ),
    st.tuples(st.just("confirm"), st.just(""), st.integers(0, 3), st.tuples(st.booleans(), st.booleans())),
    st.tuples(st.just("undo"), st.just(""), st.just(0), st.sampled_from(["carol", "alice"])),
    st.tuples(st.just("resolve"), st.just(""), st.integers(0, 3), st.booleans()),
)


def compare(old, new, history: list[tuple]) -> None:
    """Do `history` on both stores; each step must do the same on both, and both must end alike."""
    assert decisions(old) == decisions(new), "they differ right after the upgrade"
    for step in history:
        a, b = act(old, step), act(new, step)
        assert a == b, f"{step}: upgraded store {a}, store made at head {b}"
        da, db = decisions(old), decisions(new)
        assert da == db, f"they differ after {step}: " + _diff(da, db)


def _diff(a: dict, b: dict) -> str:
    only_a = [x for k in a for x in sorted(set(a[k]) - set(b[k]))]
    only_b = [x for k in b for x in sorted(set(b[k]) - set(a[k]))]
    return f"upgraded only {only_a}; made at head only {only_b}"


class UpgradeMachine(RuleBasedStateMachine):
    """Subclasses set `files`: callable () -> (upgraded db, head db), the template files to copy per example, and
    may set `round_trips`: how many times an example may take a store down and up (each costs a migration each way)."""

    files = None
    round_trips = 0

    def __init__(self):
        super().__init__()
        old, new = type(self).files()
        self.old, self.new = copy_of(old), copy_of(new)
        self.trips = 0

    def teardown(self):
        self.old.close()
        self.new.close()

    @rule(step=ACTIONS)
    def people_act(self, step):
        note(f"step {step}")
        a, b = act(self.old, step), act(self.new, step)
        assert a == b, f"{step}: upgraded store {a}, store made at head {b}"

    @precondition(lambda self: self.trips < self.round_trips)
    @rule(rev=st.sampled_from(EARLIER), upgraded=st.booleans())
    def round_trip(self, rev, upgraded):
        note(f"round trip of the {'upgraded store' if upgraded else 'store made at head'} through {rev}")
        self.trips += 1
        store = self.old if upgraded else self.new
        before = rows(store)
        store = down_and_up(store, rev)
        if upgraded:
            self.old = store
        else:
            self.new = store
        assert rows(store) == before, f"the round trip through {rev} changed the store"

    @invariant()
    def same_decisions(self):
        da, db = decisions(self.old), decisions(self.new)
        assert da == db, _diff(da, db)
