"""vhmine.curate: queues and leases, saving, drafts, discard/skip/undo, review and agreement, labels,
generated images, image safety, ready-instance reads, and several processes writing one store."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
from helpers import counting_annotation, seed_store, write_photos

from vhmine import curate as C
from vhmine.errors import AuthError, FormError, InputError, LeaseError, StoreError


@pytest.fixture
def seeded(tmp_path):
    store, tokens = seed_store(tmp_path / "c.db", tmp_path)
    yield store, tokens
    store.close()


def _task(store, task_id):
    from vhmine.store import Task

    with store.session() as s:
        return s.get(Task, task_id)


def test_sign_in_and_tokens(seeded):
    store, tokens = seeded
    assert C.sign_in(store, tokens["alice"]) == C.WorkerInfo("alice", False, True)
    assert C.sign_in(store, tokens["carol"]).is_admin
    with pytest.raises(
        AuthError, match=r"^unknown or inactive token: ask an admin for one \(`vhmine workers add NAME`\)$"
    ):
        C.sign_in(store, tokens["alice"] + "x")
    with pytest.raises(AuthError):
        C.sign_in(store, "")
    with pytest.raises(InputError, match="worker name 'al ice' is not allowed"):
        C.add_worker(store, "al ice")
    for name in ("ann.", "lee-", "-x", "a_"):  # a name is one token in a sentence: it ends with a letter or digit
        with pytest.raises(InputError, match="starting and ending with a letter or digit"):
            C.add_worker(store, name)
    C.add_worker(store, "a.b-c_9")
    with pytest.raises(AuthError, match=r"^worker 'mallory' is unknown or inactive: sign in again$"):
        C.next_item(store, "mallory", "counting")


def test_leases_hand_each_item_to_one_worker(seeded):
    store, _ = seeded
    a = C.next_item(store, "alice", "counting")
    b = C.next_item(store, "bob", "counting")
    assert a.task_id != b.task_id and a.mode == "counting" and [v.role for v in a.images] == ["A", "B"]
    assert C.next_item(store, "alice", "counting").task_id == a.task_id  # same item on reload
    assert C.next_item(store, "carol", "counting") is None  # two counting tasks, both leased
    assert a.scores["rank"] < b.scores["rank"]  # best-ranked pair first


def test_save_oeq_drafts_ynq_and_confirm(seeded):
    store, _ = seeded
    item = C.next_item(store, "alice", "counting")
    A, B = (v.id for v in item.images)
    saved = C.save_annotation(store, "alice", item.task_id, counting_annotation(item, "3\nthree", "2"))
    assert len(saved.instance_ids) == 2 and len(saved.draft_ids) == 4
    assert _task(store, item.task_id).status == "done"
    drafts = C.pending_drafts(store, "alice", "counting")
    assert [(d.image_id, d.question, d.truth) for d in drafts] == [
        (A, "Are there exactly 3 cats in the picture?", True),
        (A, "Are there exactly 2 cats in the picture?", False),
        (B, "Are there exactly 2 cats in the picture?", True),
        (B, "Are there exactly 3 cats in the picture?", False),
    ]
    assert C.pending_drafts(store, "bob") == []
    # a truth that contradicts the OEQ answer is refused and nothing changes
    bad = [C.DraftDecision(d.instance_id, True) for d in drafts]
    bad[1].truth = True
    with pytest.raises(
        FormError,
        match=(
            r"yes/no truth yes for the yes/no question \w+ contradicts the open-ended answer \(3\): '2' is not one of"
            r" them"
        ),
    ):
        C.confirm_drafts(store, "alice", bad)
    assert len(C.pending_drafts(store, "alice")) == 4
    with pytest.raises(LeaseError):
        C.confirm_drafts(store, "bob", [C.DraftDecision(drafts[0].instance_id, True)])
    ok = [C.DraftDecision(d.instance_id, True) for d in drafts[:3]] + [C.DraftDecision(drafts[3].instance_id, False)]
    assert len(C.confirm_drafts(store, "alice", ok)) == 3
    oeq = C.ready_instances(store, "counting", "OEQ")
    assert sorted((r.image_id, r.answers) for r in oeq) == sorted(
        [(A, ("3",)), (B, ("2",))]
    )  # "three" is the same answer as "3"
    assert {r.other_image_id for r in oeq} == {A, B} and all(r.template_id == "counting.how_many" for r in oeq)
    ynq = C.ready_instances(store, kind="YNQ")
    assert sorted((r.image_id, r.truth) for r in ynq) == sorted([(A, True), (A, False), (B, True)])
    assert all(r.derived_from in {o.id for o in oeq} and r.answers in (("Yes",), ("No",)) for r in ynq)
    rec = C.get_instance(store, ynq[0].id)
    assert rec == ynq[0] and rec.image_sha256.startswith(rec.image_id) and rec.image_source == "mined"


@pytest.mark.parametrize(
    "ann, field, message",
    [
        (
            dict(template_id="counting.how_many", slots={"object": ""}),
            "slot:object",
            r"^slot \{object\} of template counting.how_many is empty: fill it in$",
        ),
        (
            dict(template_id="counting.how_many", slots={"object": "cats"}, question="  "),
            "question",
            r"^the question is empty: pick a template and fill its slots$",
        ),
        (
            dict(template_id="counting.how_many", slots={"object": "cats"}, answers={"A": "3"}),
            "answers:B",
            r"^no reference answer for image B \(\w+\): write at least one acceptable answer \(one per line\)$",
        ),
        (
            dict(template_id="counting.how_many", slots={"object": "cats"}, answers={"A": "3", "B": "a few"}),
            "answers:B",
            r"^reference answer 'a few' for image B \(\w+\) is not a whole number",
        ),
        (
            dict(template_id="counting.exactly", slots={"object": "cats", "n": "3"}, truths={"A": True}),
            "truth:B",
            r"^the yes/no question for image B \(\w+\) has no truth: choose yes or no$",
        ),
        (
            dict(
                template_id="counting.exactly",
                slots={"object": "cats", "n": "3"},
                truths={"A": True, "B": True},
                answers={"B": "No, only two"},
            ),
            "answers:B",
            (
                r"^reference answer 'No, only two' for image B \(\w+\) contradicts the yes/no truth \(yes\): fix the"
                r" answer or the truth$"
            ),
        ),
        (
            dict(template_id="color.what_color", slots={"object": "cats"}),
            "template",
            r"^unknown template 'color.what_color' for mode counting",
        ),
    ],
)
def test_bad_input_saves_nothing(seeded, ann, field, message):
    from vhmine.store import Action, Instance

    store, _ = seeded
    item = C.next_item(store, "alice", "counting")
    ids = {v.role: v.id for v in item.images}
    ann = dict(ann)
    for k in ("answers", "truths"):
        ann[k] = {ids[r]: v for r, v in ann.get(k, {}).items()}
    with pytest.raises(FormError, match=message) as info:
        C.save_annotation(store, "alice", item.task_id, C.Annotation(**ann))
    assert info.value.field.split(":")[0] == field.split(":")[0]
    assert _task(store, item.task_id).status == "open"
    with store.session() as s:
        assert s.query(Instance).count() == 0 and s.query(Action).count() == 0


def test_nobodys_saved_work_is_overwritten(seeded):
    store, _ = seeded
    item = C.next_item(store, "alice", "counting")
    with pytest.raises(
        LeaseError,
        match=rf"^item {item.task_id} is leased to alice until \d\d:\d\d:\d\d UTC: nothing saved; take the next item$",
    ):
        C.save_annotation(store, "bob", item.task_id, counting_annotation(item))
    C.next_item(store, "bob", "counting")  # bob holds the other counting task
    C.next_item(store, "alice", "counting", lease_s=0)  # alice's lease runs out: carol may take her item
    taken = C.next_item(store, "carol", "counting")
    assert taken.task_id == item.task_id
    saved = C.save_annotation(store, "carol", item.task_id, counting_annotation(item, "5", "4"))
    with pytest.raises(
        LeaseError,
        match=rf"^item {item.task_id} was already annotated by carol at .* UTC: nothing saved; take the next item$",
    ):
        C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
    with pytest.raises(LeaseError):
        C.discard(store, "alice", item.task_id, "blurry")
    assert {r.id: r.answers for r in C.ready_instances(store, "counting")} == {
        i: a for i, a in zip(saved.instance_ids, [("5",), ("4",)])
    }


def test_discard_skip_undo_and_progress(seeded):
    store, _ = seeded
    item = C.next_item(store, "alice", "color")
    with pytest.raises(FormError, match=r"^give a reason for discarding"):
        C.discard(store, "alice", item.task_id, " ")
    C.discard(store, "alice", item.task_id, "no unambiguous question fits")
    color = next(p for p in C.progress(store) if p.mode == "color")
    assert (color.total, color.done, color.discarded, color.remaining) == (2, 0, 1, 1)
    assert C.undo_last(store, "alice") == f"discard of item {item.task_id}"
    t = _task(store, item.task_id)
    assert (t.status, t.lease_worker, t.discard_reason) == ("open", "alice", None)  # back, and still hers
    # skip: the skipped item comes back only after the others
    first = C.next_item(store, "alice", "color")
    assert first.task_id == item.task_id
    C.skip(store, "alice", first.task_id)
    second = C.next_item(store, "alice", "color")
    assert second.task_id != first.task_id
    C.save_annotation(
        store,
        "alice",
        second.task_id,
        C.Annotation("color.what_color", {"object": "sky"}, answers={v.id: "blue" for v in second.images}),
    )
    assert C.next_item(store, "alice", "color").task_id == first.task_id
    # undo an annotation: its instances are kept as discarded, the item reopens for alice
    saved_ids = {r.id for r in C.ready_instances(store, "color")}
    C.pending_drafts(store, "alice")
    assert C.undo_last(store, "alice") == f"annotation of item {second.task_id}"
    assert C.ready_instances(store, "color") == [] and C.pending_drafts(store, "alice") == []
    from vhmine.store import Instance

    with store.session() as s:
        gone = s.query(Instance).filter(Instance.id.in_(saved_ids)).all()
        assert gone and {(i.status, i.discard_reason) for i in gone} == {("discarded", "undone by alice")}
    assert _task(store, second.task_id).lease_worker == "alice"
    assert C.undo_last(store, "alice") == f"skip of item {first.task_id}"
    with pytest.raises(InputError, match="^nothing to undo for alice$"):
        C.undo_last(store, "alice")


def _ready_counting(store, worker="alice"):
    item = C.next_item(store, worker, "counting")
    saved = C.save_annotation(store, worker, item.task_id, counting_annotation(item))
    C.confirm_drafts(store, worker, [C.DraftDecision(d, True) for d in saved.draft_ids])
    return saved


def test_review_is_blind_and_agreement_is_kappa(seeded):
    store, _ = seeded
    _ready_counting(store)  # 2 OEQ + 4 YNQ by alice
    assert C.work.next_review(store, "alice", "counting") is None  # not her own
    seen = []
    while (r := C.work.next_review(store, "bob", "counting")) is not None:
        assert not hasattr(r, "answers") and not hasattr(r, "truth")
        seen.append(r)
        # bob agrees on everything except the "exactly 2" question about image A (truth no)
        if r.kind == "YNQ":
            inst = C.get_instance(store, r.instance_id)
            ans = "yes" if inst.truth else "no"
            if inst.truth is False and "exactly 2" in r.question:
                ans = "yes"
        else:
            ans = C.get_instance(store, r.instance_id).answers[0]
            ans = f"{ans}."  # normalized before comparing
        C.work.save_review(store, "bob", r.instance_id, ans)
    assert len(seen) == 6
    with pytest.raises(LeaseError, match="you already reviewed"):
        C.work.save_review(store, "bob", seen[0].instance_id, "yes")
    with pytest.raises(AuthError, match="reviews must come from another worker"):
        C.work.save_review(store, "alice", seen[0].instance_id, "yes")
    with pytest.raises(FormError, match=r"^answer 'maybe' is not yes, no or can't tell$"):
        C.work.save_review(store, "carol", next(r for r in seen if r.kind == "YNQ").instance_id, "maybe")
    [ag] = [a for a in C.people.mode_agreement(store) if a.mode == "counting"]
    # labels alice/bob: OEQ 3/3, 2/2; YNQ yes/yes, no/yes, yes/yes, no/no
    # p_o = 5/6; alice: 3 1 yes1... -> counts alice {3:1, 2:1, yes:2, no:2}, bob {3:1, 2:1, yes:3, no:1}
    # p_e = (1 + 1 + 6 + 2) / 36 = 10/36 -> kappa = (5/6 - 10/36) / (26/36) = 20/26
    assert (ag.statistic, ag.items, ag.raters, ag.disagreements) == ("cohen", 6, 2, 1)
    assert ag.kappa == pytest.approx(20 / 26)
    [dis] = C.people.disagreements(store, "counting")
    assert dis.question == "Are there exactly 2 cats in the picture?" and dis.ratings == {"alice": "no", "bob": "yes"}
    # a third worker: Fleiss over all three
    for r in seen:
        inst = C.get_instance(store, r.instance_id)
        C.work.save_review(
            store, "carol", r.instance_id, inst.answers[0] if inst.kind == "OEQ" else ("yes" if inst.truth else "no")
        )
    [ag] = [a for a in C.people.mode_agreement(store) if a.mode == "counting"]
    # per item P_i: five items all agree (1), one item {no, yes, no} -> 2/6; P = (5 + 1/3) / 6 = 8/9
    # shares over 18 ratings: 3:3, 2:3, yes:7, no:5 -> P_e = (9 + 9 + 49 + 25) / 324 = 92/324
    assert (ag.statistic, ag.raters) == ("fleiss", 3)
    assert ag.kappa == pytest.approx((8 / 9 - 92 / 324) / (1 - 92 / 324))
    assert C.people.mode_agreement(store)[0] == C.people.ModeAgreement("existence", None, None, 0, 0, 0)
    # undo is refused once others built on the annotation
    assert C.undo_last(store, "carol").startswith("review of ")
    with pytest.raises(LeaseError, match="cannot undo: the yes/no question .* was already reviewed"):
        C.undo_last(store, "alice")


def test_model_responses_are_labelled_by_workers(seeded):
    store, _ = seeded
    saved = _ready_counting(store)
    rid = C.work.add_response(
        store, saved.instance_ids[0], "tiny-vlm", "How many cats?", "There are 7 cats.", judge=None
    )
    with pytest.raises(InputError, match="verdict 'maybe' is not one of correct, hallucinated"):
        C.work.add_response(store, saved.instance_ids[0], "m", "p", "a", verdict="maybe")
    item = C.work.next_response(store, "bob", "counting")
    assert (item.response_id, item.model_answer, item.answers) == (rid, "There are 7 cats.", ("3",))
    C.work.label_response(store, "bob", rid, "hallucinated")
    assert C.work.next_response(store, "bob") is None
    with pytest.raises(FormError, match="choose one of: correct, hallucinated"):
        C.work.label_response(store, "carol", rid, "")
    C.work.label_response(store, "carol", rid, "hallucinated")
    [ag] = [a for a in C.people.mode_agreement(store, "responses") if a.mode == "counting"]
    assert (ag.statistic, ag.items, ag.disagreements, ag.kappa) == ("cohen", 1, 0, None)  # one category: undefined
    assert C.undo_last(store, "carol") == f"label of response {rid}"
    assert C.work.next_response(store, "carol").response_id == rid
    assert C.undo_last(store, "alice") == "confirmation of 4 yes/no question(s)"
    with pytest.raises(
        LeaseError, match=r"^cannot undo: item counting:\S+'s questions were already reviewed or answered by a model$"
    ):
        C.undo_last(store, "alice")


def test_generated_image_is_queued_alone_with_its_prompt(seeded, tmp_path):
    store, _ = seeded
    [png] = write_photos(tmp_path / "gen", ("clock",))
    tid = C.work.add_generation(
        store, png, "orientation", "a clock facing left", backend="diffusers", model="tiny-sd", seed=7, priority=-1
    )
    assert (
        C.work.add_generation(store, png, "orientation", "a clock facing left", backend="diffusers", model="tiny-sd")
        == tid
    )
    item = C.next_item(store, "dave", "orientation")
    assert (item.task_id, item.prompt, [v.role for v in item.images], item.pair_id) == (
        tid,
        "a clock facing left",
        ["image"],
        None,
    )
    C.save_annotation(
        store,
        "dave",
        tid,
        C.Annotation("orientation.facing", {"object": "clock"}, answers={item.images[0].id: "towards the camera"}),
    )
    [rec] = C.ready_instances(store, "orientation")
    assert (rec.image_source, rec.pair_id, rec.other_image_id) == ("generated", None, None)
    [d1, d2] = C.pending_drafts(store, "dave")
    assert (d1.question, d2.question) == (
        "From the camera's point of view, is the clock facing towards the camera?",
        "From the camera's point of view, is the clock facing left?",
    )


def test_images_are_served_only_from_recorded_paths(seeded, tmp_path):
    store, _ = seeded
    item = C.next_item(store, "alice", "shape")
    data = C.image_bytes(store, item.images[0].id)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    for crafted in ("../../../etc/passwd", "/etc/passwd", "0123456789ABCDEF", item.images[0].id + "/..", None):
        with pytest.raises(InputError, match="is not an image id"):
            C.image_bytes(store, crafted)
    with pytest.raises(InputError, match=r"^no image 0123456789abcdef in sqlite:///"):
        C.image_bytes(store, "0123456789abcdef")
    path = C.image_file(store, item.images[1].id)
    path.write_bytes(path.read_bytes() + b"\0")
    with pytest.raises(StoreError, match="no longer matches its recorded sha256: the file was changed; restore it"):
        C.image_bytes(store, item.images[1].id)


WRITER = textwrap.dedent("""
    import json, os, sys, time
    from vhmine import curate as C
    from vhmine.store import open_store
    url, worker, gate = sys.argv[1], sys.argv[2], sys.argv[3]
    store = open_store(url)
    open(os.path.join(gate, worker), "w").close()
    while not os.path.exists(os.path.join(gate, "go")):  # start together, so the writes overlap
        time.sleep(0.01)
    done = []
    for mode in ("counting", "color", "existence", "size"):
        while (item := C.next_item(store, worker, mode)) is not None:
            ids = [v.id for v in item.images]
            if len(done) % 5 == 4:
                C.discard(store, worker, item.task_id, "no unambiguous question fits")
            elif mode == "counting":
                ann = C.Annotation("counting.how_many", {"object": "dogs"}, answers={ids[0]: "2", ids[1]: "1"})
                C.save_annotation(store, worker, item.task_id, ann)
            else:
                template = ("existence.is_there" if mode == "existence" else
                            "color.is_color" if mode == "color" else "size.is_larger")
                slots = {"object": "dog", "color": "red", "a": "dog", "b": "cat"}
                ann = C.Annotation(template, slots, truths={i: True for i in ids})
                C.save_annotation(store, worker, item.task_id, ann)
            done.append(item.task_id)
            time.sleep(0.01)  # a worker's think time: else one process can hold SQLite's lock for the whole run
    print(json.dumps(done))
""")


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_several_processes_write_one_store_and_every_write_lands(tmp_path, backend, request):
    from vhmine.store import Instance, Task

    url = f"sqlite:///{tmp_path / 'shared.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    photos = ("astronaut", "coffee", "rocket", "horse", "camera", "coins", "moon", "page")
    store, _ = seed_store(url, tmp_path, per_mode=12, photos=photos)  # 28 pairs: 12 tasks in each mode
    workers = ["alice", "bob", "carol", "dave"]
    gate = tmp_path / "gate"
    gate.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, w, str(gate)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for w in workers
    ]
    deadline = time.monotonic() + 120
    while not all((gate / w).exists() for w in workers) and time.monotonic() < deadline:
        if any(p.poll() is not None for p in procs):
            break
        time.sleep(0.05)
    (gate / "go").touch()
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [e[-2000:] for _, e in outs]
    per_worker = {w: json.loads(o) for w, (o, _) in zip(workers, outs)}
    claimed = [t for ts in per_worker.values() for t in ts]
    assert len(claimed) == len(set(claimed)) == 48  # each task saved once, by one worker
    assert sum(1 for ts in per_worker.values() if ts) >= 2  # the work was actually shared
    with store.session() as s:
        tasks = {t.id: t for t in s.query(Task).filter(Task.mode.in_(["counting", "color", "existence", "size"]))}
        assert set(tasks) == set(claimed) and all(t.status in ("done", "discarded") for t in tasks.values())
        for w, ts in per_worker.items():
            assert all(tasks[t].done_by == w for t in ts)  # who saved it is who claimed it
        per_task = {}
        for i in s.query(Instance):
            per_task.setdefault(i.task_id, set()).add(i.created_by)
    done = [t for t in claimed if tasks[t].status == "done"]
    assert set(per_task) == set(done) and all(len(v) == 1 for v in per_task.values())
    assert sum(p.done + p.discarded for p in C.progress(store)) == 48
    store.close()


def test_undo_of_a_confirmation_is_refused_once_a_model_answered(seeded):
    store, _ = seeded
    saved = _ready_counting(store)  # alice's last action: confirming 4 drafts
    ynq = [r for r in C.ready_instances(store, "counting", "YNQ") if r.id in saved.draft_ids]
    rid = C.work.add_response(store, ynq[0].id, "tiny-vlm", "Answer yes or no.", "Yes")
    with pytest.raises(
        LeaseError, match=rf"^cannot undo: the yes/no question {ynq[0].id} was already answered by a model$"
    ):
        C.undo_last(store, "alice")
    assert C.get_instance(store, ynq[0].id).status == "ready" and C.work.next_response(store, "bob").response_id == rid


def test_skip_that_loses_a_race_logs_nothing(seeded, monkeypatch):
    from sqlalchemy import update

    from vhmine.curate.work import queue
    from vhmine.store import Action, Task

    store, _ = seeded
    item = C.next_item(store, "alice", "counting")
    real = queue.check_lease

    def raced(s, task_id, worker, now):  # another writer changes the task between our read and our write
        t = real(s, task_id, worker, now)
        s.execute(
            update(Task)
            .where(Task.id == task_id)
            .values(version=Task.version + 1)
            .execution_options(synchronize_session=False)
        )
        return t

    monkeypatch.setattr(queue, "check_lease", raced)
    with pytest.raises(
        LeaseError, match=rf"^item {item.task_id} was changed by another worker meanwhile: nothing skipped"
    ):
        C.skip(store, "alice", item.task_id)
    with store.session() as s:
        assert s.query(Action).count() == 0
    assert _task(store, item.task_id).lease_worker == "alice"


def test_an_image_named_twice_as_target_gets_one_instance(seeded):
    store, _ = seeded
    item = C.next_item(store, "alice", "counting")
    a = item.images[0].id
    saved = C.save_annotation(
        store,
        "alice",
        item.task_id,
        C.Annotation("counting.how_many", {"object": "cats"}, answers={a: "3"}, targets=[a, a]),
    )
    assert len(saved.instance_ids) == 1 and len(saved.draft_ids) == 2
    assert [r.image_id for r in C.ready_instances(store, "counting", "OEQ")] == [a]


def test_the_chosen_mode_is_kept_per_worker_across_sign_ins(tmp_path):
    from helpers import seed_store

    store, tokens = seed_store(tmp_path / "m.db", tmp_path, per_mode=1)
    alice = C.sign_in(store, tokens["alice"])
    assert C.people.chosen_mode(store, alice) is None
    C.people.choose_mode(store, alice, "Color")
    assert C.people.chosen_mode(store, C.sign_in(store, tokens["alice"])) == "color"  # a new sign-in, any browser
    assert C.people.chosen_mode(store, "bob") is None  # per worker
    with pytest.raises(InputError, match="unknown mode 'hue'"):
        C.people.choose_mode(store, alice, "hue")
    C.people.rotate_token(store, "alice")
    with pytest.raises(AuthError):  # a signed-out session cannot change it
        C.people.choose_mode(store, alice, "shape")
    store.close()
