"""A model's answer that does not answer ("I cannot tell from this image.") gets a label of its own (issue 32): the
"Label answers" page offered only correct or hallucinated for it. Now a third decision, "No answer" (Alt+3), stores
the verdict "no answer" (curate.label_response), which probe counts apart and eval scores wrong
(tests/models/test_probe.py, tests/eval/test_eval.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from helpers import counting_annotation, seed_store  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

APP = str(Path(__file__).resolve().parents[2] / "vhmine" / "apps" / "curate.py")


def test_an_answer_that_does_not_answer_has_its_own_label(tmp_path, monkeypatch):
    from vhmine import curate as C

    store, tokens = seed_store(tmp_path / "app.db", tmp_path)
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'app.db'}")
    item = C.next_item(store, "alice", "counting")
    saved = C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
    C.work.add_response(store, saved.instance_ids[0], "victim", "How many cats?", "I cannot tell from this image.")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.text_input(key="token").input(tokens["bob"])
    at.button[0].click().run()
    at.sidebar.radio(key="page").set_value("Label answers").run()
    at.sidebar.selectbox(key="mode").select("counting").run()
    labels = [b.label for b in at.main.button]
    assert labels == ["Correct", "Hallucinated", "No answer"], labels  # a third: the answer does not answer
    assert at.main.button[2].proto.shortcut.lower() == "alt+3"
    at.main.button[2].click().run()
    assert not at.exception, at.exception
    said = re.sub(r"\\(.)", r"\1", at.success[0].value)  # the app escapes Markdown
    assert said == "Verdict saved for the previous answer (no answer: How many cats are there in the picture?)."
    [(rid, verdict)] = [(k, v.verdict) for k, v in C.work.response_verdicts(store).items()]
    assert verdict == "no answer" and C.work.next_response(store, "bob") is None
    store.close()
