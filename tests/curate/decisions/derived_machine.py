"""The state machine behind test_derived_property.py: the curation library's actions, as the app calls them, on a
real ready store, checked after every step against a plain model of what people decided.

The model holds only what the test itself did, never what the code computed: each open question's answers and
status (errata), and the facts people decided: confirmed drafts, drafts rejected, yes/no questions removed,
truths decided (an erratum's flip, a worker's own wording, an admin's decision on the person-queue, each with the
open answers it was decided against), workers' labels (with the truth each judged). Undo pops the worker's last
model entry, as curate.undo takes back the worker's last action. From the model and the store's sources, the
invariants derive from scratch what must hold: the yes/no questions live (ready or draft) per open question with
their ids, truths and status; the facts kept; the person-queue; labels never judging two truths; scores read
against the truth now; undo restoring rows exactly; a refused action changing nothing; the export's items.
"""

from __future__ import annotations

from derived_model import PlainModel, snapshot
from hypothesis import note
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

NEW_VALUES = {"color": ["red", "blue", "green"], "counting": ["2", "3", "4"]}
ALIASES = {"red": "crimson", "blue": "navy", "green": "lime", "2": "3", "3": "4", "4": "5"}  # counting: a second count
OWN = "Would you call what the picture shows here by that name, question {}?"  # no template reads it: own wording
ADMIN, WORKERS = "carol", ("alice", "bob", "carol", "dave")


class DerivedMachine(PlainModel, RuleBasedStateMachine):
    """Subclasses set `open_store` (a fresh copy of the ready store, workers alice, bob, carol (admin), dave)."""

    open_store = None  # callable () -> Store
    totals: dict = {}  # over a run, per subclass: examples, steps, undos done, refusals, steps with a queue
    export_dir = None  # callable () -> Path, a fresh folder

    def __init__(self):
        super().__init__()
        from vhmine import curate as C
        from vhmine.store import Instance

        self.C = C
        self.store = type(self).open_store()
        with self.store.session(write=False) as s:
            oeqs = s.query(Instance).filter_by(kind="OEQ", status="ready").all()
            self.source = {o.id: {"answers": list(o.answers), "ready": True, "mode": o.mode} for o in oeqs}
            self.confirmed = {
                i.id
                for i in s.query(Instance).filter(Instance.derived_from.is_not(None))
                if i.status == "ready" or i.retired_from == "ready"
            }
        self.rejected: dict[str, str] = {}  # id -> the reason a person gave (draft rejected, item removed)
        self.facts: dict[str, dict] = {}  # id -> {"truth", "source", "seen"}: truths people decided
        self.own: set[str] = set()  # own wording
        # (response, worker) -> every label the worker gave there, oldest first: {"verdict", "truth" it judged, "moved"}
        # (an undo of an erratum brings back the one it set aside, so an older one may be the stored one again)
        self.labels: dict[tuple, list] = {}
        self.stack: dict[str, list] = {w: [] for w in WORKERS}  # per worker, how to take its last action back
        self.undo_of: dict[int, tuple] = {}  # erratum stack depth -> (snapshot before, snapshot after)
        self.counts = {"undone": 0, "refused": 0, "queued": 0, "steps": 0}

    def teardown(self):
        from hypothesis import event

        for k, v in self.counts.items():
            event(f"{k}: {'some' if v else 'none'}")
            type(self).totals[k] = type(self).totals.get(k, 0) + v
        type(self).totals["examples"] = type(self).totals.get("examples", 0) + 1
        type(self).totals["steps"] = type(self).totals.get("steps", 0) + self.counts["steps"]
        try:
            self.check_export()
        finally:
            self.store.close()

    # --- invariants ---------------------------------------------------------------------------------------

    @invariant()
    def derived_state_is_a_derivation_from_sources_and_facts(self):
        from vhmine.store import Instance

        want = self.expected()
        with self.store.session(write=False) as s:
            live = {
                i.id: (i.status, bool(i.truth))
                for i in s.query(Instance).filter(
                    Instance.derived_from.is_not(None), Instance.status.in_(("ready", "draft"))
                )
            }
            answers = {i.id: list(i.answers) for i in s.query(Instance).filter_by(kind="OEQ")}
            status = {i.id: i.status for i in s.query(Instance).filter_by(kind="OEQ")}
        assert live == want, {
            i: (live.get(i), want.get(i)) for i in set(live) | set(want) if live.get(i) != want.get(i)
        }
        assert {k: v["answers"] for k, v in self.source.items()} == answers
        assert {k: "ready" if v["ready"] else "discarded" for k, v in self.source.items()} == status

    @invariant()
    def no_fact_is_lost_or_overturned(self):
        from vhmine.store import Instance

        with self.store.session(write=False) as s:
            rows = {
                i.id: i for i in s.query(Instance).filter(Instance.id.in_(sorted(set(self.rejected) | set(self.facts))))
            }
            for iid, why in self.rejected.items():
                assert (rows[iid].status, rows[iid].discard_reason, rows[iid].retired_from) == ("discarded", why, None)
            for iid, f in self.facts.items():
                if iid not in self.rejected:
                    assert rows[iid].truth is f["truth"], f"the decided truth of {iid} was overturned"

    @invariant()
    def every_contradiction_is_in_the_person_queue(self):
        got, want = {c.instance_id for c in self.C.decisions.contradictions(self.store)}, self.queued()
        assert got == want, f"queued {sorted(got)}, should be {sorted(want)}"
        self.counts["queued"] += bool(got)

    @invariant()
    def labels_and_scores_judge_the_truth_now(self):
        from vhmine.rules.answers import yes_no_verdict
        from vhmine.store import BlindAnswer, Instance, Response, ResponseLabel

        with self.store.session(write=False) as s:
            truth = {i.id: i.truth for i in s.query(Instance)}
            resp = {r.id: r for r in s.query(Response)}
            stored = {(lab.response_id, lab.worker): lab.verdict for lab in s.query(ResponseLabel)}
            for r in resp.values():  # a rule's verdict is read against the truth now, whatever the path
                assert r.verdict == yes_no_verdict(r.answer, truth[r.instance_id], "vhtest"), r.id
            for b in s.query(BlindAnswer):
                assert b.correct == (yes_no_verdict(b.answer, truth[b.instance_id], "vhtest") == "correct"), b.id
        for key, verdict in stored.items():  # never a label that judged another truth (no "workers tied" from both)
            now = truth[resp[key[0]].instance_id]
            given = self.labels.get(key) or []
            assert any(m["verdict"] == verdict for m in given), f"label {key} is not one a worker gave"
            assert any(m["verdict"] == verdict and m["truth"] == now for m in given), (
                f"label {key} judged a truth that no longer holds"
            )
        for key, given in self.labels.items():  # a label whose truth never moved is never set aside
            if given and not given[-1]["moved"]:
                assert stored.get(key) == given[-1]["verdict"], f"label {key} was lost"

    # --- steps ------------------------------------------------------------------------------------------

    def _step(self, who, fn, model):
        """Run an action; on success apply `model` (which returns how to take it back) and push it for `who`; a
        refused action (LeaseError, FormError) must change nothing."""
        from vhmine.errors import FormError, LeaseError

        before = snapshot(self.store)
        self.counts["steps"] += 1
        try:
            out = fn()
        except (LeaseError, FormError) as err:
            note(f"refused: {err}")
            self.counts["refused"] += 1
            assert snapshot(self.store) == before, "a refused action changed the store"
            return None
        back = model(out)
        self.stack[who].append(back)
        self._moved(before, snapshot(self.store))
        return out

    def _moved(self, before, after):
        """Labels on instances whose truth moved in this step may have been set aside (by design)."""
        moved = {
            i for i, v in after["instances"].items() if i in before["instances"] and before["instances"][i][1] != v[1]
        }
        with self.store.session(write=False) as s:
            from vhmine.store import Response

            rids = {r.id for r in s.query(Response).filter(Response.instance_id.in_(sorted(moved)))} if moved else set()
        for key, given in self.labels.items():
            if key[0] in rids:
                for m in given:
                    m["moved"] = True

    def _ready(self, kind, derived=None):
        from vhmine.store import Instance

        with self.store.session(write=False) as s:
            q = s.query(Instance).filter_by(kind=kind, status="ready")
            if derived:
                q = q.filter(Instance.derived_from.is_not(None))
            ids = [i.id for i in q]
        return self._stable(ids)

    def _stable(self, ids):
        """`ids` in the order of what the instances are (mode, kind, image, question, answers), the same in every
        session: instance ids are random, so an order by id would send the derandomised run down another path
        each time the base store is built (and its coverage check would fail by chance)."""
        import json

        from vhmine.store import Image, Instance

        ids = list(ids)
        with self.store.session(write=False) as s:
            rows = {
                i.id: (i.mode, i.kind, sha, i.question, json.dumps(i.answers))
                for i, sha in s.query(Instance, Image.sha256)
                .join(Image, Image.id == Instance.image_id)
                .filter(Instance.id.in_(ids))
            }
        return sorted(ids, key=lambda i: (rows.get(i, ()), i))

    def _flag(self, iid):
        """bob flags the item (his own action: his undo withdraws it while it is open)."""
        fid = self.C.decisions.flag_instance(self.store, "bob", iid, "wrong")
        self.stack["bob"].append(lambda: None)
        return fid

    @rule(data=st.data(), change=st.sampled_from(["alias", "answer", "remove"]))
    def erratum_on_an_open_question(self, data, change):
        ready = self._ready("OEQ")
        if not ready:
            return
        from vhmine.store import Instance

        with self.store.session(write=False) as s:  # mostly a source of a decided truth: the queue's path
            decided = {s.get(Instance, i).derived_from for i in self.facts} & set(ready)
        decided = self._stable(decided)
        oid = data.draw(
            st.one_of(*[st.sampled_from(decided)] * 3, st.sampled_from(ready)) if decided else st.sampled_from(ready)
        )
        src = self.source[oid]
        new = list(src["answers"])
        if change == "alias":
            new = new + [ALIASES[new[0]]]
        elif change == "answer":
            new = [data.draw(st.sampled_from([v for v in NEW_VALUES[src["mode"]] if v != new[0]]))]
        note(f"erratum on {oid}: {change} {src['answers']} -> {new}")
        fix = dict(remove=True) if change == "remove" else dict(answers=new)
        depth = len(self.stack[ADMIN])

        def model(_):
            old = dict(src)
            if change == "remove":
                src["ready"] = False
            else:
                src["answers"] = new
            self.undo_of[depth] = (before, snapshot(self.store))
            return lambda: src.update(old)

        fid = self._flag(oid)
        before = snapshot(self.store)
        self._step(ADMIN, lambda: self.C.decisions.accept_erratum(self.store, ADMIN, fid, **fix), model)

    @rule(data=st.data(), remove=st.sampled_from([False, False, True]))
    def erratum_on_a_yes_no_question(self, data, remove):
        from vhmine.store import Instance

        ready = self._ready("YNQ", derived=True)
        if not ready:
            return
        iid = data.draw(st.sampled_from(ready))
        with self.store.session(write=False) as s:
            i = s.get(Instance, iid)
            truth, oid = bool(i.truth), i.derived_from
        note(f"erratum on {iid}: {'remove' if remove else f'truth -> {not truth}'}")
        depth = len(self.stack[ADMIN])

        def model(_):
            old = self.facts.get(iid)
            if remove:
                with self.store.session(write=False) as s:
                    self.rejected[iid] = s.get(Instance, iid).discard_reason
            else:
                self.facts[iid] = {"truth": not truth, "source": list(self.source[oid]["answers"])}
            self.undo_of[depth] = (before, snapshot(self.store))

            def back():
                self.rejected.pop(iid, None)
                if not remove:
                    self.facts.pop(iid)
                    if old is not None:
                        self.facts[iid] = old

            return back

        fid = self._flag(iid)
        before = snapshot(self.store)
        self._step(
            ADMIN,
            lambda: self.C.decisions.accept_erratum(
                self.store, ADMIN, fid, **(dict(remove=True) if remove else dict(truth=not truth))
            ),
            model,
        )

    @rule(data=st.data())
    def confirm_reword_or_reject_drafts(self, data):
        drafts = self.C.pending_drafts(self.store, "alice")
        if not drafts:
            return
        order = {iid: n for n, iid in enumerate(self._stable(d.instance_id for d in drafts))}
        drafts = sorted(drafts, key=lambda d: order[d.instance_id])
        picked = data.draw(st.lists(st.sampled_from(drafts), min_size=1, max_size=3, unique_by=lambda d: d.instance_id))
        how = [data.draw(st.sampled_from(["keep", "own", "reject"])) for _ in picked]
        decisions = [
            self.C.DraftDecision(
                d.instance_id,
                h != "reject",
                question=OWN.format(d.instance_id[:6]) if h == "own" else None,
                checked=h == "own",
            )
            for d, h in zip(picked, how)
        ]
        note(f"alice confirms {[(d.instance_id, h) for d, h in zip(picked, how)]}")

        def model(_):
            from vhmine.store import Instance

            added = []
            with self.store.session(write=False) as s:
                for d, h in zip(picked, how):
                    if h == "reject":
                        self.rejected[d.instance_id] = s.get(Instance, d.instance_id).discard_reason
                    else:
                        self.confirmed.add(d.instance_id)
                    if h == "own":
                        src = s.get(Instance, d.instance_id).derived_from
                        self.facts[d.instance_id] = {"truth": d.truth, "source": list(self.source[src]["answers"])}
                        self.own.add(d.instance_id)
                    added.append(d.instance_id)

            def back():
                for iid in added:
                    self.confirmed.discard(iid)
                    self.rejected.pop(iid, None)
                    self.facts.pop(iid, None)
                    self.own.discard(iid)

            return back

        self._step("alice", lambda: self.C.confirm_drafts(self.store, "alice", decisions), model)

    @rule(data=st.data())
    def admin_decides_a_queued_question(self, data):
        from vhmine.store import Instance

        queue = self.C.decisions.contradictions(self.store, ADMIN)
        if not queue:
            return
        order = {iid: n for n, iid in enumerate(self._stable(c.instance_id for c in queue))}
        queue = sorted(queue, key=lambda c: order[c.instance_id])
        c = data.draw(st.sampled_from(queue))
        keep = data.draw(st.booleans()) or c.derived is None
        truth = c.truth if keep else c.derived
        note(f"carol decides {c.instance_id}: truth {truth}")
        depth = len(self.stack[ADMIN])
        before = snapshot(self.store)

        def model(_):
            old = self.facts[c.instance_id]
            with self.store.session(write=False) as s:
                src = s.get(Instance, c.instance_id).derived_from
            self.facts[c.instance_id] = {
                "truth": truth,
                "source": list(self.source[src]["answers"]),
                **({"seen": c.derived} if c.derived is not None and c.derived != truth else {}),
            }
            self.undo_of[depth] = (before, snapshot(self.store))
            return lambda: self.facts.update({c.instance_id: old})

        self._step(
            ADMIN, lambda: self.C.decisions.resolve_contradiction(self.store, ADMIN, c.instance_id, truth), model
        )

    @rule(data=st.data(), answer=st.sampled_from(["Yes.", "No."]))
    def a_model_answers(self, data, answer):
        from vhmine.rules.answers import yes_no_verdict

        ready = self._ready("YNQ", derived=True)
        if not ready:
            return
        iid = data.draw(st.sampled_from(ready))
        truth = self.C.get_instance(self.store, iid).truth
        self.C.work.add_response(
            self.store, iid, "vlm", "p", answer, yes_no_verdict(answer, truth, "vhtest"), judge="rule:vhtest"
        )

    @rule(data=st.data(), answer=st.sampled_from(["Yes.", "No."]))
    def a_blind_solver_answers(self, data, answer):
        from vhmine.rules.answers import yes_no_verdict

        ready = self._ready("YNQ", derived=True)
        if not ready:
            return
        iid = data.draw(st.sampled_from(ready))
        r = self.C.get_instance(self.store, iid)
        self.C.work.record_blind_answer(
            self.store,
            iid,
            model="text-only",
            endpoint=None,
            prompt="blind@v1#x",
            answer=answer,
            correct=yes_no_verdict(answer, r.truth, "vhtest") == "correct",
            scorer="rule:vhtest",
            group=self.C.work.blind_group_key(r.mode, r.kind, r.pair_id, r.question, r.id),
        )

    @rule(data=st.data(), worker=st.sampled_from(["bob", "dave"]), verdict=st.sampled_from(["correct", "hallucinated"]))
    def a_worker_labels_an_answer(self, data, worker, verdict):
        from vhmine.store import Instance, Response, ResponseLabel

        with self.store.session(write=False) as s:  # in a reproducible order (response ids are random)
            mine = {r for (r,) in s.query(ResponseLabel.response_id).filter_by(worker=worker)}
            open_ = [
                (i.id, r.created_at, r.id, bool(i.truth))
                for r, i in s.query(Response, Instance)
                .join(Instance, Instance.id == Response.instance_id)
                .filter(Instance.status == "ready")
                if r.id not in mine
            ]
        if not open_:
            return
        order = {iid: n for n, iid in enumerate(self._stable({o[0] for o in open_}))}
        _, _, rid, truth = data.draw(st.sampled_from(sorted(open_, key=lambda o: (order[o[0]], o[1], o[2]))))
        key = (rid, worker)

        def model(_):
            self.labels.setdefault(key, []).append({"verdict": verdict, "truth": truth, "moved": False})
            return lambda: self.labels[key].pop()

        self._step(worker, lambda: self.C.work.label_response(self.store, worker, rid, verdict), model)

    @rule(worker=st.sampled_from(WORKERS))
    @precondition(lambda self: any(self.stack.values()))
    def undo(self, worker):
        if not self.stack[worker]:
            return
        depth = len(self.stack[worker]) - 1
        before = snapshot(self.store)

        def model(said):
            note(f"undo by {worker}: {said}")
            self.counts["undone"] += 1
            self.stack[worker].pop()()  # the model's entry for the action it took back
            if worker == ADMIN and depth in self.undo_of:
                self.rows_restored(*self.undo_of.pop(depth), before)
            return None

        if self._step(worker, lambda: self.C.undo_last(self.store, worker), model) is not None:
            self.stack[worker].pop()  # the undo itself is no entry

    def rows_restored(self, pre, post, now_before_undo):
        """Undo of an admin's decision restores the instance rows it changed exactly (those nobody changed since),
        and the rows it made are no longer live."""
        now = snapshot(self.store)["instances"]
        for iid, row in pre["instances"].items():
            if post["instances"][iid] != now_before_undo["instances"][iid]:
                continue  # changed since by someone else: the invariants above say what must hold for it
            assert now[iid][:3] == row[:3] and now[iid][4:7] == row[4:7], f"undo did not restore {iid}"
        for iid in set(post["instances"]) - set(pre["instances"]):
            assert now[iid][0] == "discarded", f"undo left {iid} live"

    # --- the export -----------------------------------------------------------------------------------------

    def check_export(self):
        """The store's ready set, and the export's items, ids and truths, are those a derivation from scratch makes
        ready now (the model's open questions and the yes/no questions it derives ready)."""
        from vhmine import formats as F
        from vhmine.errors import VhmineError
        from vhmine.export.job import ExportOptions, export_benchmark

        truths = {i: t for i, (status, t) in self.expected().items() if status == "ready"}
        want = set(truths) | {o for o, v in self.source.items() if v["ready"]}
        assert {r.id for r in self.C.ready_instances(self.store, locate=False)} == want
        out = type(self).export_dir()
        try:
            export_benchmark(
                self.store, ExportOptions(out=out, format="vhtest", allow_unbalanced=True, drop_blind=False)
            )
        except VhmineError as err:  # e.g. a mode left with nothing ready: said, and nothing to compare
            note(f"export refused: {err}")
            return
        exported = {it.id: it for it in F.load(out)}
        assert set(exported) == want
        assert {i: it.truth for i, it in exported.items() if i in truths} == truths
