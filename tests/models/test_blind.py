"""Blind solvers (`vhmine blind`): a text-only model on a real loopback OpenAI-compatible server answers
each ready question without its image; a question right on every image it is asked of is flagged in
the store; workers see and overrule flags; `export --drop-blind` leaves flagged items out and the
manifest holds blind accuracy per mode."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers import write_pairs, write_photos  # noqa: E402
from openai_server import chat_images, chat_text  # noqa: E402

# the canned text-only model: by the question in the prompt
CANNED = {
    "How many cats": "2",  # counting pair: 2 cats on both images -> right on both: flagged
    "exactly 2 cats": "Yes",  # its yes/no variant, yes on both images: flagged
    "What color is the cup": "Probably red.",  # red on A, blue on B: right on one image only
    "Is the cup red": "Yes",  # yes on A, no on B: right on one only
    "Is the cup blue": "No",  # no on A, yes on B: right on one only
    "shape of the clock": "round",  # round on both, but the request fails in the first run
    "How many horses": "1",  # a generated image alone: right on its one image: flagged
    "exactly 1 horses": "Yes",  # its yes/no variant: flagged
}  # anything else ("exactly 3 cats", "Is the clock round?", ...): "I cannot tell.", wrong


def responder(body):
    text = chat_text(body)
    return next((a for q, a in CANNED.items() if q in text), "I cannot tell.")


def _store(tmp_path):
    """Ready instances: counting (2 / 2 cats), color (red / blue cup), shape (round / round clock) over
    three mined pairs, and counting on a generated image (1 horse); every drafted yes/no kept."""
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    store = open_store(tmp_path / "store.db")
    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket", "horse"))
    seed_pairs(
        store, write_pairs(tmp_path / "runs" / "t", photos[:3]), per_mode=1, modes=["counting", "color", "shape"]
    )
    C.add_worker(store, "alice")
    C.add_worker(store, "bob")
    for mode, tpl, slots, a_ans, b_ans in (
        ("counting", "counting.how_many", {"object": "cats"}, "2", "2"),
        ("color", "color.what_color", {"object": "cup"}, "red", "blue"),
        ("shape", "shape.what_shape", {"object": "clock"}, "round", "round"),
    ):
        item = C.next_item(store, "alice", mode)
        a, b = (v.id for v in item.images)
        saved = C.save_annotation(store, "alice", item.task_id, C.Annotation(tpl, slots, answers={a: a_ans, b: b_ans}))
        C.confirm_drafts(store, "alice", [C.DraftDecision(d, True) for d in saved.draft_ids])
    C.work.add_generation(store, photos[3], "counting", "a horse in a field", backend="openai", model="dall-e-3")
    item = C.next_item(store, "alice", "counting")
    (img,) = (v.id for v in item.images)
    saved = C.save_annotation(
        store, "alice", item.task_id, C.Annotation("counting.how_many", {"object": "horses"}, answers={img: "1"})
    )
    C.confirm_drafts(store, "alice", [C.DraftDecision(d, True) for d in saved.draft_ids])
    return store


def _by_question(store):
    from vhmine import curate as C

    out = {}
    for r in C.ready_instances(store):
        out.setdefault(r.question, []).append(r)
    return out


def _opts(tmp_path, srv, **kw):
    from vhmine.llm import LLMOptions
    from vhmine.models.blind import BlindOptions

    return BlindOptions(
        llm=LLMOptions(
            model="text-only", base_url=srv.base_url, cache=tmp_path / "cache.db", max_retries=0, retry_wait_s=0.0
        ),
        **kw,
    )


def test_blind_flags_only_questions_right_on_every_image(tmp_path, openai_server):  # noqa: F811
    from vhmine import curate as C
    from vhmine.models.blind import blind
    from vhmine.store import BlindAnswer

    store = _store(tmp_path)
    srv = openai_server
    srv.responder = responder
    srv.refuse = lambda body: "shape of the clock" in chat_text(body)  # a failed call
    res = blind(store, _opts(tmp_path, srv))
    # one per question text, none with an image: the refused question's twin shares its failure (single flight),
    # where it asked again (13 calls)
    assert len(srv.chats()) == 12 and not any(chat_images(c) for c in srv.chats())
    qs = _by_question(store)
    flagged = {i.instance_id for i in res.items if i.flagged}
    want = {
        r.id
        for q in (
            "How many cats are there in the picture?",
            "Are there exactly 2 cats in the picture?",
            "How many horses are there in the picture?",
            "Are there exactly 1 horses in the picture?",
        )
        for r in qs[q]
    }
    assert len(want) == 6  # two pairs' questions on both images, two single-image questions
    assert flagged == want
    assert res.partial and {f.instance_id for f in res.failed} == {r.id for r in qs["What is the shape of the clock?"]}
    with store.session(write=False) as s:
        rows = {r.instance_id: r for r in s.query(BlindAnswer)}
    # the colour questions were answered, right on one image each, and are not flagged
    color = {r.id for q in ("What color is the cup?", "Is the cup red?", "Is the cup blue?") for r in qs[q]}
    assert color <= set(rows) and sum(rows[i].correct for i in color) == 3 and not any(rows[i].flag_id for i in color)
    # the failed call left no answer, so no flag
    assert not {r.id for r in qs["What is the shape of the clock?"]} & set(rows)
    # each flag is recorded with the model, prompt and the answers
    r = rows[qs["How many cats are there in the picture?"][0].id]
    assert (r.model, r.answer, r.correct, r.scorer) == ("text-only", "2", True, "match")
    assert r.prompt.startswith("blind@v1#") and r.endpoint == srv.base_url
    flags = C.work.flag_list(store, "bob")
    assert {f.question for f in flags} == {
        "How many cats are there in the picture?",
        "Are there exactly 2 cats in the picture?",
        "How many horses are there in the picture?",
        "Are there exactly 1 horses in the picture?",
    }
    cats = next(f for f in flags if f.question.startswith("How many cats"))
    assert len(cats.items) == 2 and {it.blind_answer for it in cats.items} == {"2"} and cats.model == "text-only"
    assert {it.references for it in cats.items} == {("2",)}

    # rerun with the server answering: only the failed questions are asked, and now flagged (round on both)
    srv.refuse = lambda body: False
    n = len(srv.chats())
    res2 = blind(store, _opts(tmp_path, srv))
    assert len(srv.chats()) - n == 1 and not res2.partial
    assert {i.instance_id for i in res2.items if i.flagged} == want | {
        r.id for r in qs["What is the shape of the clock?"]
    }
    assert (
        next(f for f in C.work.flag_list(store, "bob") if f.question.startswith("How many cats")).flag_id
        == cats.flag_id
    )


def test_drop_blind_export_and_overrule(tmp_path, openai_server):  # noqa: F811
    from vhmine import curate as C
    from vhmine.errors import FormError
    from vhmine.export.job import ExportOptions, export_benchmark
    from vhmine.models.blind import blind

    store = _store(tmp_path)
    openai_server.responder = responder
    openai_server.refuse = lambda body: "shape of the clock" in chat_text(body)
    blind(store, _opts(tmp_path, openai_server))
    qs = _by_question(store)
    flagged = {
        i
        for q in (
            "How many cats are there in the picture?",
            "Are there exactly 2 cats in the picture?",
            "How many horses are there in the picture?",
            "Are there exactly 1 horses in the picture?",
        )
        for i in (r.id for r in qs[q])
    }
    everything = {r.id for rs in qs.values() for r in rs}

    def export(name, **kw):
        export_benchmark(store, ExportOptions(out=tmp_path / name, format="vhtest", allow_unbalanced=True, **kw))
        return json.loads((tmp_path / name / "manifest.json").read_text())

    kept = export("all")
    assert set(kept["instances"]) == everything
    dropped = export("dropped", drop_blind=True)
    assert set(dropped["instances"]) == everything - flagged

    # blind accuracy per mode, by hand, over what was exported
    (solver,) = dropped["blind"]["solvers"]
    assert dropped["blind"]["left_out"] == 6 and solver["model"] == "text-only" and "endpoint" not in solver
    # color: 2 OEQ + 4 YNQ asked, right: "red" on A, "Is the cup red?" yes on A, "Is the cup blue?" no on A
    assert solver["per_mode"]["color"] == {
        "asked": 6,
        "right": 3,
        "accuracy": 0.5,
        "flagged_kept": 0,
        "overruled": 0,
        "left_out": 0,
        "unscored": 0,
    }
    # counting: the 6 flagged left out, the 3 left ("exactly 3 cats" twice, "exactly 2 horses") all wrong
    assert solver["per_mode"]["counting"] == {
        "asked": 3,
        "right": 0,
        "accuracy": 0.0,
        "flagged_kept": 0,
        "overruled": 0,
        "left_out": 6,
        "unscored": 0,
    }
    # shape: its open question never answered (the failed call), its 4 yes/no ones answered wrong
    assert solver["per_mode"]["shape"] == {
        "asked": 4,
        "right": 0,
        "accuracy": 0.0,
        "flagged_kept": 0,
        "overruled": 0,
        "left_out": 0,
        "unscored": 0,
    }
    (solver_all,) = kept["blind"]["solvers"]
    assert solver_all["per_mode"]["counting"] == {
        "asked": 9,
        "right": 6,
        "accuracy": 0.6667,
        "flagged_kept": 6,
        "overruled": 0,
        "left_out": 0,
        "unscored": 0,
    }

    # a worker overrules one flag (with a reason): its questions come back, and the record says who and why
    flag = next(f for f in C.work.flag_list(store, "bob") if f.question.startswith("How many cats"))
    with pytest.raises(FormError):
        C.work.overrule_blind_flag(store, "bob", flag.flag_id, "  ")
    C.work.overrule_blind_flag(store, "bob", flag.flag_id, "two cats is the usual guess; this pair is about counting")
    back = {it.instance_id for it in flag.items}
    again = export("overruled", drop_blind=True)
    assert set(again["instances"]) == everything - flagged | back
    (solver,) = again["blind"]["solvers"]
    assert solver["per_mode"]["counting"]["overruled"] == 2 and solver["per_mode"]["counting"]["left_out"] == 4
    seen = next(f for f in C.work.flag_list(store, "alice") if f.flag_id == flag.flag_id)
    assert seen.overruled and seen.overruled_by == "bob" and seen.overrule_reason.startswith("two cats")
    assert flag.flag_id not in {f.flag_id for f in C.work.flag_list(store, "alice", include_overruled=False)}
    C.work.reinstate_blind_flag(store, "alice", flag.flag_id)
    assert set(export("reinstated", drop_blind=True)["instances"]) == everything - flagged


def test_no_blind_section_without_blind_answers(tmp_path):
    from vhmine.export.job import ExportOptions, export_benchmark

    store = _store(tmp_path)
    export_benchmark(store, ExportOptions(out=tmp_path / "e", format="vhtest", allow_unbalanced=True))
    assert "blind" not in json.loads((tmp_path / "e" / "manifest.json").read_text())


def test_cli_blind_and_export_drop_blind(tmp_path, openai_server):  # noqa: F811
    from typer.testing import CliRunner

    from vhmine.cli import app

    store = _store(tmp_path)
    store.close()
    openai_server.responder = responder
    db = str(tmp_path / "store.db")
    run = CliRunner().invoke(
        app,
        [
            "blind",
            "--model",
            "text-only",
            "--db",
            db,
            "--cache",
            str(tmp_path / "c.db"),
            "--max-retries",
            "0",
            "--mode",
            "counting",
            "--mode",
            "color",
        ],
    )
    assert run.exit_code == 0, run.output
    assert "text-only" in run.output and "4 question group(s) flagged" in run.output
    from vhmine.files import shown_path

    assert run.output.strip().splitlines()[-1] == (
        f"next: look at the flags on the app's Blind flags page (vhmine curate --db {shown_path(db)}) and overrule "
        "those a question needs its image for; then `vhmine export --drop-blind` leaves the rest out"
    )
    assert '"Blind flags"' in (Path(__file__).resolve().parents[2] / "vhmine" / "apps" / "curate.py").read_text()
    run = CliRunner().invoke(
        app, ["export", "--out", str(tmp_path / "e"), "--db", db, "--drop-blind", "--allow-unbalanced"]
    )
    assert run.exit_code == 0, run.output
    assert "left out 6 instance(s)" in run.output
    man = json.loads((tmp_path / "e" / "manifest.json").read_text())
    assert man["blind"]["drop_blind"] is True and man["blind"]["left_out"] == 6


def test_open_answers_scored_by_the_judge(tmp_path, openai_server):  # noqa: F811
    from vhmine import curate as C
    from vhmine.models.blind import blind
    from vhmine.rules.judge import judge_prompt
    from vhmine.store import BlindAnswer

    store = _store(tmp_path)

    def judged(body):  # a lenient judge: every open answer is correct, so the colour question is flagged too
        return "correct" if "correct, incorrect or unclear" in chat_text(body) else responder(body)

    openai_server.responder = judged
    blind(store, _opts(tmp_path, openai_server, judge="judge-model", modes=["color"], kinds=["OEQ"]))
    with store.session(write=False) as s:
        rows = s.query(BlindAnswer).all()
    assert len(rows) == 2 and all(r.correct and r.flag_id for r in rows)
    assert {r.scorer for r in rows} == {"llm:judge-model " + judge_prompt().id}
    (flag,) = C.work.flag_list(store, "alice")
    assert flag.question == "What color is the cup?" and flag.scorer.startswith("llm:judge-model judge_oeq@v1#")


# --- stored answers follow their reference (issue 16) ----------------------------------------------------------


def _set_answers(store, question, image_index, answers):
    """A reference changed the way stores before vhmine carried fixes through saw it: in place, nothing else."""
    from vhmine.store import Instance

    rec = sorted(_by_question(store)[question], key=lambda r: r.image_id)[image_index]
    with store.session() as s:
        s.get(Instance, rec.id).answers = answers
    return rec


def test_a_rerun_scores_stored_answers_against_the_current_reference(tmp_path, openai_server):  # noqa: F811
    from vhmine import curate as C
    from vhmine.models.blind import blind

    store = _store(tmp_path)
    openai_server.responder = responder
    first = blind(store, _opts(tmp_path, openai_server, modes=["counting", "color"], kinds=["OEQ"]))
    cats = {r.id for r in _by_question(store)["How many cats are there in the picture?"]}
    cups = {r.id for r in _by_question(store)["What color is the cup?"]}
    assert cats <= {i.instance_id for i in first.items if i.flagged} and not cups & C.work.blind_dropped(store)
    # the cup on the blue image was red after all; one image has 3 cats, not 2
    blue = next(r for r in C.ready_instances(store, "color", "OEQ") if r.answers == ("blue",))
    _set_answers(
        store,
        "What color is the cup?",
        [r.id for r in sorted(_by_question(store)["What color is the cup?"], key=lambda r: r.image_id)].index(blue.id),
        ["red"],
    )
    _set_answers(store, "How many cats are there in the picture?", 0, ["3"])
    n = len(openai_server.chats())
    again = blind(store, _opts(tmp_path, openai_server, modes=["counting", "color"], kinds=["OEQ"]))
    # before: 0 requests and the stale verdicts: the cup never flagged, the cats' false flag kept
    assert len(openai_server.chats()) == n and again.sent == 0  # match scores stored answers without asking
    flagged = {i.instance_id for i in again.items if i.flagged}
    assert cups <= flagged and not cats & flagged  # "Probably red." right on both; "2" wrong on the 3-cat image
    assert cups <= C.work.blind_dropped(store) and not cats & C.work.blind_dropped(store)
    assert again.rescored == 2 and "2 stored answer(s) scored again" in again.summary()  # the two references changed
    assert not again.partial
    # a third run finds nothing to score again
    assert blind(store, _opts(tmp_path, openai_server, modes=["counting", "color"], kinds=["OEQ"])).rescored == 0


def test_an_erratum_leaves_a_judged_answer_for_the_rerun_to_judge_again(tmp_path, openai_server):  # noqa: F811
    from vhmine import curate as C
    from vhmine.models.blind import blind
    from vhmine.store import BlindAnswer

    store = _store(tmp_path)
    C.add_worker(store, "carol", admin=True)
    judged = []

    def judge(body):
        if "correct, incorrect or unclear" in chat_text(body):
            judged.append(chat_text(body))
            return "incorrect" if "green" in chat_text(body) else "correct"
        return responder(body)

    openai_server.responder = judge
    opts = _opts(tmp_path, openai_server, judge="judge-model", modes=["color"], kinds=["OEQ"])
    blind(store, opts)
    (flag,) = C.work.flag_list(store, "alice")
    blue = next(r for r in C.ready_instances(store, "color", "OEQ") if r.answers == ("blue",))
    fid = C.decisions.flag_instance(store, "bob", blue.id, "the cup is green")
    C.decisions.accept_erratum(store, "carol", fid, answers="green")
    with store.session(write=False) as s:  # the judge saw "blue": no score, no flag until it judges "green"
        assert s.query(BlindAnswer).filter_by(instance_id=blue.id).one().correct is None
    assert C.work.flag_list(store, "alice") == [] and not C.work.blind_dropped(store)
    n = len(judged)
    again = blind(store, opts)
    assert len(judged) - n == 1 and "green" in judged[-1]  # only the answer whose reference changed is judged again
    with store.session(write=False) as s:
        row = s.query(BlindAnswer).filter_by(instance_id=blue.id).one()
        assert (row.correct, row.reference) == (False, {"answers": ["green"], "truth": None})
    assert again.rescored == 1 and C.work.flag_list(store, "alice") == []
    # the undo of the erratum puts the judged score back: the flag is there again
    C.undo_last(store, "carol")
    assert [f.flag_id for f in C.work.flag_list(store, "alice")] == [flag.flag_id]


def test_blind_accuracy_counts_each_question_once_per_solver_whatever_the_endpoint(tmp_path, openai_server):  # noqa: F811
    from vhmine.export.job import ExportOptions, export_benchmark
    from vhmine.models.blind import blind

    store = _store(tmp_path)
    openai_server.responder = responder
    blind(store, _opts(tmp_path, openai_server, modes=["color"]))
    other = _opts(tmp_path, openai_server, modes=["color"])
    blind(
        store,
        type(other)(
            **{
                **other.__dict__,
                "llm": type(other.llm)(
                    **{**other.llm.__dict__, "base_url": openai_server.base_url.replace("127.0.0.1", "localhost")}
                ),
            }
        ),
    )
    export_benchmark(store, ExportOptions(out=tmp_path / "e", format="vhtest", allow_unbalanced=True))
    (solver,) = json.loads((tmp_path / "e" / "manifest.json").read_text())["blind"]["solvers"]
    # before: asked 12, right 6 (each of the 6 colour questions twice, once per endpoint)
    assert (solver["per_mode"]["color"]["asked"], solver["per_mode"]["color"]["right"]) == (6, 3)
    export_benchmark(
        store, ExportOptions(out=tmp_path / "p", format="vhtest", allow_unbalanced=True, with_provenance=True)
    )
    per_endpoint = json.loads((tmp_path / "p" / "manifest.json").read_text())["blind"]["solvers"]
    assert sorted(s["per_mode"]["color"]["asked"] for s in per_endpoint) == [6, 6] and len(per_endpoint) == 2
