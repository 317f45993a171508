"""A model's answer that does not answer ("I cannot tell from this image.") gets a label of its own (issue 32): the
"Label answers" page offered only correct or hallucinated for it. The fix lies in the store's verdicts and
vhmine/curate (label_response, response_verdicts) and eval, which the house move (issue 31) is regrouping: its plan
is in the issue's notes (i32-port.md); this test says what the page must offer, and fails until then (strict
xfail: it turns red the day it passes, to be unmarked)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from helpers import counting_annotation, seed_store  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = str(Path(__file__).resolve().parents[2] / "vhmine" / "apps" / "curate.py")


@pytest.mark.xfail(strict=True, reason="issue 32: a verdict for answers that do not answer (plan: i32-port.md)")
def test_an_answer_that_does_not_answer_has_its_own_label(tmp_path, monkeypatch):
    from vhmine import curate as C

    store, tokens = seed_store(tmp_path / "app.db", tmp_path)
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'app.db'}")
    item = C.next_item(store, "alice", "counting")
    saved = C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
    C.add_response(store, saved.instance_ids[0], "victim", "How many cats?", "I cannot tell from this image.")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.text_input(key="token").input(tokens["bob"])
    at.button[0].click().run()
    at.sidebar.radio(key="page").set_value("Label answers").run()
    at.sidebar.selectbox(key="mode").select("counting").run()
    labels = [b.label for b in at.main.button]
    assert {"Correct", "Hallucinated"} <= set(labels) and len(labels) >= 3, labels  # a third: no answer given
    store.close()
