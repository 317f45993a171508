"""Drafts that workers verify (`vhmine draft`): a vision model on a real loopback OpenAI-compatible server sees
both images of each seeded pair task and drafts a question with an answer per image and yes/no variants;
malformed drafts and drafts with one answer for both images are rejected by rule; workers accept, edit or
reject the others (curate.verify); the saving is measured from the action log (checked by hand)."""

import datetime as dt
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import write_pairs, write_photos  # noqa: E402
from openai_server import chat_images, chat_text  # noqa: E402

CANNED = {  # the canned vision model: by the mode named in the prompt
    '"color"': json.dumps(
        {
            "template": "color.what_color",
            "slots": {"object": "cup"},
            "question": "What color is the cup?",
            "answer_a": "red",
            "answer_b": "blue",
            "yes_no": [
                {"question": "Is the cup red?", "answer_a": "yes", "answer_b": "no"},
                {"question": "Is the cup blue?", "answer_a": "no", "answer_b": "yes"},
            ],
        }
    ),
    # the same answer on both images: rejected by rule
    '"counting"': json.dumps(
        {"template": "counting.how_many", "slots": {"object": "cats"}, "answer_a": "2", "answer_b": "two", "yes_no": []}
    ),
    '"shape"': "Sure! The clock on the left is round and the one on the right is square.",  # malformed
    # no yes/no given: vhmine drafts them from the answers; in a ```json fence, as models like to
    '"existence"': "```json\n"
    + json.dumps(
        {
            "template": "existence.what_is",
            "slots": {"where": "on the table"},
            "answer_a": "a cup",
            "answer_b": "a spoon",
        }
    )
    + "\n```",
}


def responder(body):
    text = chat_text(body)
    return next(a for k, a in CANNED.items() if k in text)


def _seeded(tmp_path):
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    store = open_store(tmp_path / "store.db")
    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket"))
    seed_pairs(
        store,
        write_pairs(tmp_path / "runs" / "t", photos),
        per_mode=2,
        modes=["color", "counting", "shape", "existence"],
    )
    for w in ("alice", "bob"):
        C.add_worker(store, w)
    C.add_worker(store, "carol", admin=True)
    return store


def _opts(tmp_path, srv, **kw):
    from vhmine.llm import LLMOptions
    from vhmine.models.draft import DraftOptions

    return DraftOptions(
        llm=LLMOptions(
            model="fake-vlm", base_url=srv.base_url, cache=tmp_path / "cache.db", max_retries=0, retry_wait_s=0.0
        ),
        **kw,
    )


@pytest.fixture
def drafted(tmp_path, openai_server):  # noqa: F811
    from vhmine.models.draft import draft

    store = _seeded(tmp_path)
    openai_server.responder = responder
    res = draft(store, _opts(tmp_path, openai_server))
    yield store, res, openai_server
    store.close()


def test_draft_sends_both_images_and_applies_the_rules(drafted):
    from sqlalchemy import select

    from vhmine.store import Draft, Image, Pair, Task

    store, res, srv = drafted
    assert not res.partial and len(res.items) == 8 and len(srv.chats()) == 8
    with store.session(write=False) as s:
        for body in srv.chats():  # image A then image B of the task's pair
            mode = next(m for m in ("color", "counting", "shape", "existence") if f'"{m}"' in chat_text(body))
            assert "strict JSON" in chat_text(body)
            pairs = [s.get(Pair, t.pair_id) for t in s.scalars(select(Task).where(Task.mode == mode))]
            want = [[s.get(Image, p.image_a).sha256, s.get(Image, p.image_b).sha256] for p in pairs]
            assert chat_images(body) in want
        drafts = {d.task_id: d for d in s.scalars(select(Draft))}
    by_status = {}
    for d in drafts.values():
        by_status.setdefault((d.mode, d.status), []).append(d)
    assert {k: len(v) for k, v in by_status.items()} == {
        ("color", "pending"): 2,
        ("existence", "pending"): 2,
        ("counting", "rule_rejected"): 2,
        ("shape", "rule_rejected"): 2,
    }
    same = by_status[("counting", "rule_rejected")][0]
    assert (
        same.reason
        == "image A and image B share the answer '2': a pair question must have a different answer on each image"
    )
    bad = by_status[("shape", "rule_rejected")][0]
    assert bad.reason.startswith("malformed draft: not JSON") and bad.raw == CANNED['"shape"']
    d = by_status[("color", "pending")][0]
    assert (d.model, d.endpoint, d.template_id, d.question) == (
        "fake-vlm",
        srv.base_url,
        "color.what_color",
        "What color is the cup?",
    )
    assert d.prompt.startswith("draft@v1#")
    ex = by_status[("existence", "pending")][0]  # yes/no drafted by vhmine from the two answers
    assert [y["question"] for y in ex.yes_no] == ["Is there a cup on the table?", "Is there a spoon on the table?"]
    assert "rejected by rule: counting:" in res.summary()


def test_rerun_asks_nothing_again(drafted, tmp_path):
    from vhmine.models.draft import draft

    store, _, srv = drafted
    n = len(srv.chats())
    res = draft(store, _opts(tmp_path, srv))
    assert len(srv.chats()) == n and {i.status for i in res.items} == {"skipped"}


def test_accept_edit_reject_and_undo(drafted):
    from vhmine import curate as C
    from vhmine.errors import FormError, LeaseError
    from vhmine.store import Action, Draft, Task

    store, _, _ = drafted
    # drafted pairs are in the verify queue, not the annotate queue; rule-rejected ones stay for annotating
    assert C.next_item(store, "alice", "color") is None
    assert C.next_item(store, "alice", "counting") is not None
    item = C.work.next_verify_item(store, "alice", "color")
    a, b = (v.id for v in item.images)
    assert item.answers == {a: ("red",), b: ("blue",)} and item.model == "fake-vlm"
    with pytest.raises(LeaseError, match="leased to alice"):
        C.work.accept_draft(store, "bob", item.draft_id)
    got = C.work.accept_draft(store, "alice", item.draft_id)
    assert got.decision == "accept" and len(got.instance_ids) == 6
    recs = {(r.image_id, r.question): r for r in C.ready_instances(store, "color")}
    assert recs[(a, "What color is the cup?")].answers == ("red",) and recs[(b, "Is the cup red?")].truth is False
    assert recs[(a, "Is the cup red?")].truth is True and {r.created_by for r in recs.values()} == {"alice"}
    assert recs[(a, "Is the cup red?")].derived_from == recs[(a, "What color is the cup?")].id
    with store.session(write=False) as s:
        act = s.query(Action).filter_by(kind="verify").one()
        assert act.payload["model"] == "fake-vlm" and act.payload["prompt"].startswith("draft@v1#")
        assert act.payload["decision"] == "accept" and sorted(act.payload["instances"]) == sorted(got.instance_ids)
        assert s.get(Task, item.task_id).status == "done"
    with pytest.raises(LeaseError, match="already decided"):
        C.work.accept_draft(store, "alice", item.draft_id)

    # edit: a new answer for image B must come with yes/no variants that agree with it
    item2 = C.work.next_verify_item(store, "bob", "color")
    a2, b2 = (v.id for v in item2.images)
    with pytest.raises(FormError, match="contradicts the open-ended answer"):
        C.work.edit_draft(store, "bob", item2.draft_id, answers={a2: "red", b2: "navy"})
    got = C.work.edit_draft(
        store,
        "bob",
        item2.draft_id,
        answers={a2: "red", b2: "navy"},
        yes_no=[("Is the cup red?", {a2: True, b2: False}), ("Is the cup navy?", {a2: False, b2: True})],
    )
    assert got.decision == "edit" and len(got.instance_ids) == 6
    assert {
        r.answers for r in C.ready_instances(store, "color", "OEQ") if r.image_id == b2 and r.task_id == item2.task_id
    } == {("navy",)}

    # reject: a reason is needed; the pair goes back to the annotate queue
    ex = C.work.next_verify_item(store, "alice", "existence")
    with pytest.raises(FormError, match="say why"):
        C.work.reject_draft(store, "alice", ex.draft_id, "  ")
    C.work.reject_draft(store, "alice", ex.draft_id, "image B has no spoon")
    with store.session(write=False) as s:
        assert s.get(Draft, ex.draft_id).status == "rejected" and s.get(Draft, ex.draft_id).decided_by == "alice"
    assert C.next_item(store, "bob", "existence").task_id == ex.task_id

    # undo the reject (refused while bob holds the pair), then the accept: the draft waits again, its
    # instances are discarded
    with pytest.raises(LeaseError, match="taken by someone else"):
        C.undo_last(store, "alice")
    C.skip(store, "bob", ex.task_id)
    assert C.undo_last(store, "alice").startswith("reject of draft")
    assert C.next_item(store, "bob", "existence") is None  # both existence pairs wait in the verify queue again
    assert C.undo_last(store, "alice").startswith("accept of draft")
    with store.session(write=False) as s:
        assert s.get(Draft, item.draft_id).status == "pending" and s.get(Task, item.task_id).status == "open"
    assert not [r for r in C.ready_instances(store, "color") if r.task_id == item.task_id]
    again = C.work.next_verify_item(store, "alice", "color")
    assert again.draft_id == item.draft_id


def test_draft_needs_a_model_or_stats(tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    run = CliRunner().invoke(app, ["draft", "--db", str(tmp_path / "s.db")])
    assert run.exit_code == 2 and "give --model M" in run.output


def test_cli_draft_and_stats(tmp_path, openai_server):  # noqa: F811
    from typer.testing import CliRunner

    from vhmine.cli import app

    _seeded(tmp_path).close()
    openai_server.responder = responder
    db = str(tmp_path / "store.db")
    run = CliRunner().invoke(
        app,
        [
            "draft",
            "--model",
            "fake-vlm",
            "--db",
            db,
            "--cache",
            str(tmp_path / "c.db"),
            "--max-retries",
            "0",
            "--mode",
            "color",
            "--mode",
            "counting",
        ],
    )
    assert run.exit_code == 0, run.output
    assert "color" in run.output and "rejected by rule" in run.output and len(openai_server.chats()) == 4
    run = CliRunner().invoke(app, ["draft", "--stats", "--db", db])
    assert run.exit_code == 0, run.output
    row = next(line.split() for line in run.output.splitlines() if line.startswith("counting"))
    assert row[:5] == ["counting", "0", "-", "2", "2"]  # no items yet, two drafts both rejected by rule


def test_savings_by_hand(tmp_path):
    """A small action log, its times worked out by hand (seconds from t0):

    alice: annotate counting@0 (first action: untimed), confirm@20, annotate counting@100 (80 s) + confirm@130
    (30 s) = 110 s; verify accept@150 (20 s), edit@190 (40 s), reject@200 (10 s), accept@2000 (a 1800 s break:
    untimed). bob: annotate color@0 (untimed), annotate color@50 (50 s), an undone annotate color@60 (not an item).
    counting: scratch 2 items, 110 s each timed; verify 4 decisions: accept 2, edit 1, reject 1; time per decision
    (20+40+10)/3; per kept draft (20+40+10)/2 timed kept = 35 s; saving 1 - 35/110.
    """
    from vhmine import curate as C
    from vhmine.errors import AuthError
    from vhmine.store import Action

    store = _seeded(tmp_path)
    with store.session(write=False) as s:
        from vhmine.store import Task

        tasks = {m: [t.id for t in s.query(Task).filter_by(mode=m).order_by(Task.id)] for m in ("counting", "color")}
    C.work.record_draft(
        store, tasks["counting"][0], model="m", endpoint=None, prompt="draft@v1#x", raw="{}", reason="malformed"
    )
    t0 = dt.datetime(2025, 1, 1, 9, 0, 0)
    log = [
        ("alice", "annotate", "counting", 0, {}),
        ("alice", "confirm", None, 20, {}),
        ("alice", "annotate", "counting", 100, {}),
        ("alice", "confirm", None, 130, {}),
        ("alice", "verify", "counting", 150, {"decision": "accept", "mode": "counting"}),
        ("alice", "verify", "counting", 190, {"decision": "edit", "mode": "counting"}),
        ("alice", "verify", "counting", 200, {"decision": "reject", "mode": "counting"}),
        ("alice", "verify", "counting", 2000, {"decision": "accept", "mode": "counting"}),
        ("bob", "annotate", "color", 0, {}),
        ("bob", "annotate", "color", 50, {}),
        ("bob", "annotate", "color", 60, {"undone": True}),
    ]
    with store.session() as s:
        for w, kind, mode, sec, payload in log:
            at = t0 + dt.timedelta(seconds=sec)
            s.add(
                Action(
                    worker=w,
                    kind=kind,
                    task_id=tasks[mode][0] if mode else None,
                    payload=payload,
                    created_at=at,
                    undone_at=at if payload.get("undone") else None,
                )
            )
    rows = {r.mode: r for r in C.people.draft_savings(store)}
    assert list(rows) == ["color", "counting", "all"]
    c = rows["counting"]
    assert (c.scratch_items, c.s_per_scratch, c.drafted, c.rule_rejected) == (2, 110.0, 1, 1)
    assert (c.decided, c.accepted, c.edited, c.rejected) == (4, 2, 1, 1)
    assert (c.accept_rate, c.edit_rate) == (0.5, 0.25)
    assert c.s_per_decision == pytest.approx(70 / 3) and c.s_per_kept == 35.0
    assert c.saving == pytest.approx(1 - 35 / 110)
    assert (rows["color"].scratch_items, rows["color"].s_per_scratch, rows["color"].decided) == (2, 50.0, 0)
    assert rows["all"].scratch_items == 4 and rows["all"].s_per_scratch == pytest.approx((110 + 50) / 2)
    with pytest.raises(AuthError, match="not an admin"):
        C.people.draft_savings(store, by="alice")
    assert C.people.draft_savings(store, by="carol") == list(rows.values())
    assert "saving = 1 - s/kept / s/item" in C.people.savings_table(list(rows.values()))


# --- the app's Verify drafts page (AppTest) ------------------------------------------------------------------


def _plain(markdown: str) -> str:
    """Undo the app's Markdown escaping (a backslash before each ASCII punctuation mark)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def _app_signed_in(token, page, mode):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(
        str(Path(__file__).resolve().parents[2] / "vhmine" / "apps" / "curate.py"), default_timeout=60
    )
    at.run()
    at.text_input(key="token").input(token)
    at.button[0].click().run()
    at.sidebar.radio(key="page").set_value(page).run()
    if mode:
        at.sidebar.selectbox(key="mode").select(mode).run()
    assert not at.exception, at.exception
    return at


def test_verify_page_accept_edit_reject(tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    from helpers import seed_store

    from vhmine import curate as C
    from vhmine.rules.draft_check import parse_draft
    from vhmine.store import Draft, Task

    store, tokens = seed_store(tmp_path / "app.db", tmp_path)
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'app.db'}")
    with store.session(write=False) as s:
        tasks = [(t.id, t.pair_id) for t in s.query(Task).filter_by(mode="color").order_by(Task.priority, Task.id)]
        from vhmine.store import Pair

        pairs = {t: (s.get(Pair, p).image_a, s.get(Pair, p).image_b) for t, p in tasks}
    ids = []
    for tid, _ in tasks:
        content = parse_draft(CANNED['"color"'], "color", list(pairs[tid]))
        ids.append(
            C.work.record_draft(
                store, tid, model="fake-vlm", endpoint=None, prompt="draft@v1#test", raw="{}", content=content
            )
        )

    at = _app_signed_in(tokens["alice"], "Verify drafts", "color")
    assert [h.value for h in at.header] == ["Verify drafts: color"]
    first = ids[0]
    assert at.text_input(key=f"vq:{first}").value == "What color is the cup?"
    assert at.text_area(key=f"va:{first}:B").value == "blue"
    assert any("by fake-vlm (draft@v1#test)" in _plain(c.value) for c in at.caption)
    at.text_area(key=f"va:{first}:B").input("navy").run()
    at.button(key=f"vedit:{first}").click().run()
    assert any("contradicts the open" in _plain(e.value) for e in at.error)  # the yes/no variants still say blue
    at.checkbox(key=f"vk:{first}:1").uncheck().run()  # drop "Is the cup blue?"
    at.button(key=f"vedit:{first}").click().run()
    assert not at.exception and any("edited): 4 question(s) ready" in _plain(m.value) for m in at.success), [
        e.value for e in at.error
    ]
    second = ids[1]
    assert at.text_input(key=f"vq:{second}").value == "What color is the cup?"
    at.button(key=f"vrej:{second}").click().run()
    assert any("say why the draft is wrong" in _plain(e.value) for e in at.error)
    at.text_input(key=f"vreason:{second}").input("both cups are white").run()
    at.button(key=f"vrej:{second}").click().run()
    assert [_plain(i.value) for i in at.info][-1] == "No drafts to verify in color."
    with store.session(write=False) as s:
        got = {d.id: (d.status, d.decided_by, d.reason) for d in s.query(Draft)}
    assert got == {first: ("edited", "alice", None), second: ("rejected", "alice", "both cups are white")}
    navy = [r for r in C.ready_instances(store, "color", "OEQ") if r.answers == ("navy",)]
    assert len(navy) == 1 and navy[0].created_by == "alice"

    admin = _app_signed_in(tokens["carol"], "Admin", None)
    admin.radio(key="admin_section").set_value("Drafts: time saved").run()  # one section at a time
    assert "Drafts: time saved" in [h.value for h in admin.subheader]

    # two tables that fit the page (one of twelve columns ran off it), empty cells as "-"
    def records(t):  # the table's cells are escaped Markdown
        return [{k: _plain(v) if isinstance(v, str) else v for k, v in r.items()} for r in t.value.to_dict("records")]

    [counts] = [records(t) for t in admin.table if "verified" in t.value.columns]
    [rates] = [records(t) for t in admin.table if "s/kept draft" in t.value.columns]
    color = {**next(r for r in counts if r["mode"] == "color"), **next(r for r in rates if r["mode"] == "color")}
    assert (color["verified"], color["edit rate"], color["reject rate"]) == (2, "50.0%", "50.0%")  # as the CLI
    assert all(v is not None and str(v) != "None" for r in counts + rates for v in r.values())
    store.close()


def test_rules_by_hand():
    """The draft rules on their own: yes/no variants drafted from the answers only when none are given."""
    from vhmine.errors import FormError
    from vhmine.rules.draft_check import check_content, parse_draft

    got = check_content(
        "counting", ["A", "B"], "counting.how_many", {"object": "cats"}, None, {"A": "3", "B": "2"}, None
    )
    assert [(y.question, y.truths) for y in got.yes_no] == [
        ("Are there exactly 3 cats in the picture?", {"A": True, "B": False}),
        ("Are there exactly 2 cats in the picture?", {"A": False, "B": True}),
    ]
    none = check_content(
        "counting", ["A", "B"], "counting.how_many", {"object": "cats"}, None, {"A": "3", "B": "2"}, []
    )
    assert none.yes_no == ()  # a worker who unticks every variant keeps none
    with pytest.raises(FormError, match="is yes on both images"):
        check_content(
            "counting",
            ["A", "B"],
            "counting.how_many",
            {"object": "cats"},
            None,
            {"A": "3", "B": "2"},
            [("Are there cats?", {"A": True, "B": True})],
        )
    with pytest.raises(FormError, match="yes/no template"):
        check_content(
            "counting", ["A", "B"], "counting.exactly", {"object": "cats", "n": "2"}, None, {"A": "3", "B": "2"}, None
        )
    with pytest.raises(FormError, match="malformed draft: answer_b missing"):
        parse_draft(json.dumps({"template": "counting.how_many", "answer_a": "3"}), "counting", ["A", "B"])
    reworded = check_content(
        "color",
        ["A", "B"],
        "color.what_color",
        {"object": "cup"},
        "Which hue does the mug have?",
        {"A": "red", "B": "blue"},
        [],
    )
    assert (reworded.template_id, reworded.base_template, reworded.slots) == ("color.own", "color.what_color", {})
