"""vhmine/apps/errata_page.py through Streamlit's AppTest: an admin sees the person-queue (a yes/no question whose
open answers changed since a person decided its truth) with both sides, and decides it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from helpers import make_ready_store  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = str(Path(__file__).resolve().parents[2] / "vhmine" / "apps" / "curate.py")


def test_an_admin_decides_the_person_queue_on_the_errata_page(tmp_path, monkeypatch):
    from vhmine import curate as C

    store = make_ready_store(tmp_path)
    C.add_worker(store, "bob")
    token = C.add_worker(store, "carol", admin=True)
    recs = {
        (r.answers[0] if r.kind == "OEQ" else None, r.question, r.image_id): r
        for r in C.ready_instances(store, "color")
    }
    cup_a = next(r for (a, q, _), r in recs.items() if a == "red")
    red_a = next(r for (_, q, img), r in recs.items() if q == "Is the cup red?" and img == cup_a.image_id)
    for iid, fix in ((red_a.id, dict(truth=False)), (cup_a.id, dict(answers=["red", "crimson"]))):
        C.decisions.accept_erratum(store, "carol", C.decisions.flag_instance(store, "bob", iid, "wrong"), **fix)
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'store.db'}")

    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.text_input(key="token").input(token)
    at.button[0].click().run()
    at.sidebar.radio(key="page").set_value("Errata").run()
    assert not at.exception, at.exception
    assert "Answers changed since a person decided (1)" in [s.value for s in at.subheader]
    captions = re.sub(
        r"\\([!-/:-@\[-`{-~])", r"\1", " ".join(str(c.value) for c in at.caption)
    )  # the page escapes Markdown
    assert "against the open answers red" in captions and "red / crimson, which imply yes" in captions
    assert at.radio(key=f"cq_truth:{red_a.id}").value == "no"  # the decided truth stands until the admin chooses
    at.button(key=f"cq_ok:{red_a.id}").click().run()
    assert not at.exception, at.exception
    assert C.decisions.contradictions(store) == [] and C.get_instance(store, red_a.id).truth is False
    assert "Answers changed since a person decided (0)" in [s.value for s in at.subheader]
    store.close()
