"""Errata (curate.errata): any worker flags an instance of a released export as wrong, by the id the export
writes; an admin accepts (fixing the answer in place, or removing the item) or rejects the flag; every step is
in the action log with the payload the export changelog reads; undo takes a flag or a decision back."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from helpers import make_ready_store  # noqa: E402


@pytest.fixture
def store(reviewed_store):  # (conftest.py)
    return reviewed_store


def _released_ids(store, tmp_path):
    """The instance ids as a released export writes them."""
    from vhmine.export.job import ExportOptions, export_benchmark

    export_benchmark(store, ExportOptions(out=tmp_path / "v1", format="vhtest", allow_unbalanced=True))
    man = json.loads((tmp_path / "v1" / "manifest.json").read_text())
    return man["instances"]


def _rec(store, question, image_index=0):
    from vhmine import curate as C

    recs = sorted((r for r in C.ready_instances(store) if r.question == question), key=lambda r: r.image_id)
    return recs[image_index]


def _actions(store, kind):
    from vhmine.store import Action

    with store.session(write=False) as s:
        return [(a.worker, a.payload) for a in s.query(Action).filter_by(kind=kind).order_by(Action.id)]


def test_flag_then_accept_fixes_the_answer_in_place(store, tmp_path):
    from vhmine import curate as C
    from vhmine.errors import AuthError, FormError, InputError, LeaseError

    released = _released_ids(store, tmp_path)
    oeq = _rec(store, "How many cats are there in the picture?")
    assert oeq.id in released
    with pytest.raises(FormError, match="say what is wrong"):
        C.decisions.flag_instance(store, "bob", oeq.id, " ")
    with pytest.raises(InputError, match="no ready instance 'nope'"):
        C.decisions.flag_instance(store, "bob", "nope", "wrong count")
    fid = C.decisions.flag_instance(
        store, "bob", f"  {oeq.id} ", "there are four cats, one behind the sofa", proposed="4"
    )
    assert _actions(store, "errata_flag") == [
        ("bob", {"instance_id": oeq.id, "reason": "there are four cats, one behind the sofa", "flag_id": fid})
    ]
    # bob sees his flag; only an admin sees everyone's and decides
    assert [e.id for e in C.decisions.errata_list(store, "bob")] == [fid] and C.decisions.errata_list(
        store, "alice"
    ) == []
    [view] = C.decisions.errata_list(store, "carol")
    assert (view.instance_id, view.answers, view.proposed, view.flagged_by) == (oeq.id, oeq.answers, "4", "bob")
    with pytest.raises(AuthError, match="not an admin"):
        C.decisions.accept_erratum(store, "bob", fid, answers="4")
    with pytest.raises(FormError, match="not a whole number"):
        C.decisions.accept_erratum(store, "carol", fid, answers="four-ish")
    with pytest.raises(FormError, match="already has"):
        C.decisions.accept_erratum(store, "carol", fid, answers=list(oeq.answers))
    changes = C.decisions.accept_erratum(store, "carol", fid, answers="4\nfour")
    assert changes == {"answers": [list(oeq.answers), ["4"]]}  # "four" is the same answer as "4"
    assert C.get_instance(store, oeq.id).answers == ("4",) and C.get_instance(store, oeq.id).status == "ready"
    [(who, payload)] = _actions(store, "errata_accept")
    # what the fix carried through to (curate.decisions.derived, tests/curate/decisions/test_derived.py)
    derived = payload.pop("derived")
    assert (who, payload) == (
        "carol",
        {
            "instance_id": oeq.id,
            "reason": "there are four cats, one behind the sofa",
            "changes": changes,
            "flag_id": fid,
            "flagged_by": "bob",
        },
    )
    assert {e["table"] for e in derived} >= {"instances"}  # "exactly 3 cats" retired, "exactly 4" drafted
    with pytest.raises(LeaseError, match="already accepted by carol"):
        C.decisions.reject_erratum(store, "carol", fid, "no")
    assert (
        C.decisions.errata_list(store, "carol") == []
        and C.decisions.errata_list(store, "carol", status="accepted")[0].changes == changes
    )

    # undo: carol's decision is taken back (the answer restored, the flag open again), then bob withdraws his flag
    assert C.undo_last(store, "carol").startswith("accept of flag")
    assert (
        C.get_instance(store, oeq.id).answers == oeq.answers
        and C.decisions.errata_list(store, "carol")[0].status == "open"
    )
    assert C.undo_last(store, "bob").startswith("flag of instance")
    assert (
        C.decisions.errata_list(store, "carol") == []
        and C.decisions.errata_list(store, "bob", status="withdrawn")[0].id == fid
    )


def test_yes_no_fix_remove_and_reject(store):
    from vhmine import curate as C
    from vhmine.errors import FormError

    ynq = next(r for r in C.ready_instances(store) if r.question == "Is the cup red?" and r.truth)  # image A
    f1 = C.decisions.flag_instance(store, "alice", ynq.id, "the cup is orange")
    with pytest.raises(FormError, match="choose yes or no"):
        C.decisions.accept_erratum(store, "carol", f1, answers="No")
    assert C.decisions.accept_erratum(store, "carol", f1, truth=False, reason="orange, not red") == {
        "truth": [True, False],
        "answers": [["Yes"], ["No"]],
    }
    rec = C.get_instance(store, ynq.id)
    assert (rec.truth, rec.answers) == (False, ("No",))
    assert _actions(store, "errata_accept")[0][1]["reason"] == "orange, not red"

    other = _rec(store, "What color is the cup?", 1)
    f2 = C.decisions.flag_instance(store, "bob", other.id, "you cannot tell the color in this light")
    assert C.decisions.accept_erratum(store, "carol", f2, remove=True) == {"status": ["ready", "discarded"]}
    assert other.id not in {r.id for r in C.ready_instances(store)}

    f3 = C.decisions.flag_instance(store, "bob", _rec(store, "Is the cup blue?").id, "looks blue-green")
    with pytest.raises(FormError, match="say why"):
        C.decisions.reject_erratum(store, "carol", f3, "")
    C.decisions.reject_erratum(store, "carol", f3, "blue under the house's color names")
    [(who, payload)] = _actions(store, "errata_reject")
    assert who == "carol" and payload == {
        "instance_id": _rec(store, "Is the cup blue?").id,
        "reason": "blue under the house's color names",
        "changes": {},
        "flag_id": f3,
        "flagged_by": "bob",
    }
    assert (
        C.decisions.errata_list(store, "bob", status="rejected")[0].decision_reason
        == "blue under the house's color names"
    )


# --- the app's Errata page (AppTest) -------------------------------------------------------------------------


def _plain(markdown: str) -> str:
    import re

    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def _app(token, page):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(
        str(Path(__file__).resolve().parents[3] / "vhmine" / "apps" / "curate.py"), default_timeout=60
    )
    at.run()
    at.text_input(key="token").input(token)
    at.button[0].click().run()
    at.sidebar.radio(key="page").set_value(page).run()
    at.sidebar.selectbox(key="mode").select("counting").run()
    assert not at.exception, at.exception
    return at


@pytest.mark.slow
def test_errata_page_flag_then_admin_accepts(tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    from vhmine import curate as C
    from vhmine.store import Worker

    store = make_ready_store(tmp_path)
    tokens = {"bob": C.add_worker(store, "bob"), "carol": C.add_worker(store, "carol", admin=True)}
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'store.db'}")
    oeq = _rec(store, "How many cats are there in the picture?")

    at = _app(tokens["bob"], "Errata")
    assert [h.value for h in at.header] == ["Errata"] and "Open flags (0)" not in [h.value for h in at.subheader]
    at.text_input(key="er_id").input(oeq.id).run()
    assert "How many cats are there in the picture?" in [t.value for t in at.text]  # the item, to check it is the one
    at.button(key="er_flag").click().run()
    assert any("say what is wrong" in _plain(e.value) for e in at.error)
    at.text_input(key="er_reason").input("four cats: one is behind the sofa").run()
    at.text_input(key="er_proposed").input("4").run()
    at.button(key="er_flag").click().run()
    assert any(f"Flagged {oeq.id}" in _plain(m.value) for m in at.success)
    [mine] = [
        [{k: _plain(str(v)) for k, v in r.items()} for r in d.value.to_dict("records")]
        for d in at.table
        if "what is wrong" in d.value.columns
    ]
    assert [(r["instance"], r["status"], r["decided by"], r["why"]) for r in mine] == [(oeq.id, "open", "-", "-")]

    admin = _app(tokens["carol"], "Errata")
    assert "Open flags (1)" in [h.value for h in admin.subheader]
    [flag] = C.decisions.errata_list(store, "carol")
    assert admin.text_area(key=f"er_ans:{flag.id}").value == "4"  # the flagger's proposal, to accept or change
    admin.button(key=f"er_acc:{flag.id}").click().run()
    assert any(f"Accepted flag {flag.id}" in _plain(m.value) for m in admin.success), [e.value for e in admin.error]
    assert "Open flags (0)" in [h.value for h in admin.subheader]
    assert C.get_instance(store, oeq.id).answers == ("4",)
    assert _actions(store, "errata_accept")[0][1]["changes"] == {"answers": [list(oeq.answers), ["4"]]}
    with store.session() as s:  # the right is checked by the library, not the page: a demoted admin cannot decide
        s.get(Worker, "carol").is_admin = False
    f2 = C.decisions.flag_instance(store, "bob", oeq.id, "still wrong")
    from vhmine.errors import AuthError

    with pytest.raises(AuthError):
        C.decisions.reject_erratum(store, "carol", f2, "no")
    store.close()


# --- the app's Blind flags page (AppTest): automatic flags a worker overrules -----------------------------------


def test_blind_flags_page_overrule_and_reinstate(tmp_path, monkeypatch):
    pytest.importorskip("streamlit")
    from vhmine import curate as C

    store = make_ready_store(tmp_path)
    token = C.add_worker(store, "bob")
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'store.db'}")
    for r in C.ready_instances(store, "counting", "OEQ"):  # right on both images of the pair: flagged
        C.work.record_blind_answer(
            store,
            r.id,
            model="text-only",
            endpoint=None,
            prompt="blind@v1#x",
            answer=r.answers[0],
            correct=True,
            scorer="match",
            group=C.work.blind_group_key(r.mode, r.kind, r.pair_id, r.question, r.id),
        )
    C.work.refresh_blind_flags(store, "text-only", None, "blind@v1#x")
    [flag] = C.work.flag_list(store, "bob")
    at = _app(token, "Blind flags")
    assert [h.value for h in at.header] == ["Blind flags: counting"]
    assert "How many cats are there in the picture?" in [t.value for t in at.text]
    at.button(key=f"bov:{flag.flag_id}").click().run()
    assert any("say why the question needs its image" in _plain(e.value) for e in at.error)
    at.text_input(key=f"bwhy:{flag.flag_id}").input("the model guessed; count differs per image").run()
    at.button(key=f"bov:{flag.flag_id}").click().run()
    [flag] = C.work.flag_list(store, "bob")
    assert (flag.overruled_by, flag.overrule_reason) == ("bob", "the model guessed; count differs per image")
    assert "the model guessed; count differs per image" in [t.value for t in at.text]
    at.button(key=f"bre:{flag.flag_id}").click().run()
    assert not C.work.flag_list(store, "bob")[0].overruled and C.work.blind_dropped(store)
    store.close()
