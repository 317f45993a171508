"""vhmine/apps/curate.py through Streamlit's AppTest: sign-in, annotate (with YNQ drafts), bad input, discard
and undo, blind review, agreement on the admin page, labelling model answers, text shown as text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from helpers import counting_annotation, seed_store  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from vhmine import curate as C  # noqa: E402

APP = str(Path(__file__).resolve().parents[2] / "vhmine" / "apps" / "curate.py")


@pytest.fixture
def env(tmp_path, monkeypatch):
    store, tokens = seed_store(tmp_path / "app.db", tmp_path)
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'app.db'}")
    yield store, tokens
    store.close()


def _signed_in(token: str, page: str | None = None, mode: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.text_input(key="token").input(token)
    at.button[0].click().run()
    assert not at.exception, at.exception
    if page:
        at.sidebar.radio(key="page").set_value(page).run()
    if mode:
        at.sidebar.selectbox(key="mode").select(mode).run()
    assert not at.exception, at.exception
    return at


def _by_label(widgets, label):
    found = [w for w in widgets if w.label == label]
    assert found, f"no widget labelled {label!r}: {[w.label for w in widgets]}"
    return found[0]


def _plain(markdown: str) -> str:
    """Undo the app's Markdown escaping (a backslash before each ASCII punctuation mark)."""
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


def _texts(at) -> list[str]:
    out = []
    for kind in ("markdown", "text", "caption", "error", "info", "success", "title", "header", "subheader"):
        out += [str(e.value) for e in getattr(at, kind)]
    return out


def test_sign_in(env):
    store, tokens = env
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert at.text_input(key="token").proto.type == at.text_input(key="token").proto.PASSWORD
    at.text_input(key="token").input("vhm_wrong")
    at.button[0].click().run()
    assert [_plain(e.value) for e in at.error] == [
        "unknown or inactive token: ask an admin for one (`vhmine workers add NAME`)"
    ]
    assert "worker" not in at.session_state and len(at.sidebar.radio) == 0  # nothing to write with
    at = _signed_in(tokens["alice"])
    assert at.sidebar.markdown[0].value == "Signed in as **alice**"
    assert _by_label(at.sidebar.radio, "Page").options == [
        "Annotate",
        "Review",
        "Label answers",
        "Verify drafts",
        "Errata",
        "Blind flags",
    ]  # no Admin
    assert "token" not in at.session_state and not any(tokens["alice"] in t for t in _texts(at))


def test_annotate_confirm_drafts_and_progress(env):
    store, tokens = env
    at = _signed_in(tokens["alice"], mode="counting")
    _by_label(at.text_input, "{object}").input("cats").run()
    assert _by_label(at.text_input, "Question").value == "How many cats are there in the picture?"
    _by_label(at.text_area, "Reference answer(s) for image A, one per line").input("3")
    _by_label(at.text_area, "Reference answer(s) for image B, one per line").input("2")
    _by_label(at.button, "Save").click().run()
    assert not at.exception, at.exception
    assert [_plain(s.value) for s in at.success] == ["Saved 2 question(s); confirm 4 drafted yes/no question(s)."]
    assert [w.value for w in at.text_input if w.label == "Yes/no question"] == [
        "Are there exactly 3 cats in the picture?",
        "Are there exactly 2 cats in the picture?",
        "Are there exactly 2 cats in the picture?",
        "Are there exactly 3 cats in the picture?",
    ]
    [c for c in at.checkbox if c.label == "Keep"][3].uncheck()
    _by_label(at.button, "Confirm").click().run()
    assert [_plain(s.value) for s in at.success] == ["Confirmed 3 yes/no question(s)."]
    assert sorted(r.truth for r in C.ready_instances(store, "counting", "YNQ")) == [False, True, True]
    assert len(C.ready_instances(store, "counting", "OEQ")) == 2
    prog = at.sidebar.table[0].value
    assert list(prog.columns) == ["mode", "done", "left", "ready"]  # four short columns: all fit the sidebar
    row = prog[prog["mode"] == "counting"].iloc[0]
    assert (row["done"], row["left"], row["ready"]) == (1, 1, 5)


def test_bad_input_shows_a_message_and_saves_nothing(env):
    store, tokens = env
    at = _signed_in(tokens["alice"], mode="counting")
    _by_label(at.text_input, "{object}").input("cats").run()
    _by_label(at.text_area, "Reference answer(s) for image A, one per line").input("3")
    _by_label(at.button, "Save").click().run()
    [err] = at.error
    err = _plain(err.value)
    assert err.startswith("no reference answer for image B (") and err.endswith(
        "): write at least one acceptable answer (one per line)"
    )
    _by_label(at.text_area, "Reference answer(s) for image B, one per line").input("**many** <b>x</b>")
    _by_label(at.button, "Save").click().run()
    shown = at.error[0].value
    assert r"\*\*many\*\* \<b\>x\<\/b\>" in shown  # escaped: shown literally, not as bold or HTML
    assert _plain(shown).startswith("reference answer '**many** <b>x</b>' for image B (")
    _by_label(at.selectbox, "Template").select("counting.exactly").run()
    _by_label(at.text_input, "{n}").input("3")
    _by_label(at.text_input, "{object}").input("cats").run()
    _by_label(at.radio, "Truth for image A").set_value("yes")
    _by_label(at.button, "Save").click().run()
    assert _plain(at.error[0].value).startswith("the yes/no question for image B (")
    assert C.ready_instances(store) == [] and C.pending_drafts(store, "alice") == []
    assert [p.remaining for p in C.progress(store) if p.mode == "counting"] == [2]


def test_discard_then_undo(env):
    store, tokens = env
    at = _signed_in(tokens["alice"], mode="color")
    _by_label(at.button, "Discard").click().run()
    assert _plain(at.error[0].value).startswith("give a reason for discarding")
    _by_label(at.text_input, "Discard reason").input("two buses, which one is meant is unclear")
    _by_label(at.button, "Discard").click().run()
    assert _plain(at.info[0].value).startswith("Discarded color:")
    assert [p.discarded for p in C.progress(store) if p.mode == "color"] == [1]
    at.sidebar.button(key="undo").click().run()
    assert _plain(at.info[0].value).startswith("Undone: discard of item color:")
    assert [(p.discarded, p.remaining) for p in C.progress(store) if p.mode == "color"] == [(0, 2)]


def test_undo_then_skip_keeps_the_question_field_filled(env):
    """The question field of an item that comes back (undo) or that was shown before (skip) is filled:
    Streamlit drops a widget's state in a run that does not draw it, and the app used to think it had
    already filled it."""
    store, tokens = env
    at = _signed_in(tokens["alice"], mode="color")
    first = _by_label(at.text_input, "Question").value
    assert first == "What color is the {object}?"

    def shown_item():
        return next(_plain(c.value) for c in at.caption if _plain(c.value).startswith("item "))

    one = shown_item()
    _by_label(at.button, "Skip").click().run()
    two = shown_item()
    assert two != one and _by_label(at.text_input, "Question").value == first
    at.sidebar.button(key="undo").click().run()
    assert _plain(at.info[0].value).startswith("Undone: skip of item color:")
    assert shown_item() == one and _by_label(at.text_input, "Question").value == first
    _by_label(at.button, "Skip").click().run()
    assert shown_item() == two and _by_label(at.text_input, "Question").value == first
    _by_label(at.text_input, "{object}").input("bus").run()  # the slots still fill it
    assert _by_label(at.text_input, "Question").value == "What color is the bus?"


def test_images_are_drawn_at_their_own_width(env, monkeypatch):
    """st.image gets width "content" (its pixel width, at most the column's), never "stretch", which drew a
    32 px image 940 px wide; the caption goes apart, as st.image's own widens a small image to its width.
    AppTest's tree drops an element's width, so the messages the app sent are read as they pass."""
    import streamlit.testing.v1.local_script_runner as runner

    sent = []
    parse = runner.parse_tree_from_messages
    monkeypatch.setattr(runner, "parse_tree_from_messages", lambda msgs: (sent.extend(msgs), parse(msgs))[1])
    store, tokens = env
    item = C.next_item(store, "alice", "counting")
    saved = C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
    C.work.add_response(store, saved.instance_ids[0], "m", "How many cats?", "Seven cats.")
    at = _signed_in(tokens["bob"], page="Label answers", mode="counting")
    sent.clear()
    at.run()
    images = [m.delta.new_element for m in sent if m.HasField("delta") and m.delta.new_element.HasField("imgs")]
    assert len(images) == 1
    assert [e.width_config.WhichOneof("width_spec") for e in images] == ["use_content"]
    assert all(not img.caption for e in images for img in e.imgs.imgs)
    assert len(at.get("image")) == len(images)


def test_annotate_draws_a_pairs_images_side_by_side_at_one_height(env, tmp_path):
    """The pair's images in one row, each drawn at the row's height: a small one scaled up, a portrait one as
    tall as a landscape one (flex shares by aspect ratio), the row's width capped so its height stays <= 260 px."""
    import base64
    import io
    import re

    from PIL import Image

    from vhmine.apps.page_helpers import ROW_HEIGHT

    store, tokens = env
    at = _signed_in(tokens["bob"], page="Annotate", mode="counting")
    [row] = [h.proto.body for h in at.get("html") if "data-vh-row" in h.proto.body]
    cells = re.findall(r'flex:([0-9.]+) 1 0.*?src="data:image/jpeg;base64,([^"]+)" alt="(image [AB])[^"]*"', row)
    assert [alt for *_, alt in cells] == ["image A", "image B"]
    item = C.next_item(store, "bob", "counting")
    for (flex, data, _alt), view in zip(cells, item.images):
        drawn = Image.open(io.BytesIO(base64.b64decode(data)))
        original = Image.open(io.BytesIO(C.image_bytes(store, view.id)))
        assert drawn.height == 2 * ROW_HEIGHT > original.height  # the helpers' 96 px photos: scaled up
        assert abs(float(flex) - original.width / original.height) < 1e-3  # its share of the row: its aspect ratio
        assert abs(drawn.width / drawn.height - original.width / original.height) < 0.01
    width = float(re.search(r"max-width:([0-9.]+)px", row).group(1))
    assert width == pytest.approx(sum(float(f) for f, *_ in cells) * ROW_HEIGHT + 12, abs=1)
    assert _by_label(at.selectbox, "Template") is not None  # the form follows the row


def test_review_is_blind_and_admin_sees_agreement(env):
    store, tokens = env
    item = C.next_item(store, "alice", "counting")
    ids = [v.id for v in item.images]
    C.save_annotation(
        store,
        "alice",
        item.task_id,
        C.Annotation(
            "counting.exactly",
            {"object": "<script>alert(1)</script> **cats**", "n": "2"},
            truths={ids[0]: True, ids[1]: False},
        ),
    )
    at = _signed_in(tokens["bob"], page="Review", mode="counting")
    question = "Are there exactly 2 <script>alert(1)</script> **cats** in the picture?"
    assert at.text[0].value == question  # shown verbatim as text, not rendered
    assert not any("alert(1)" in m.value for m in at.markdown)
    assert not any(t in ("yes", "no", "Yes", "No") for t in _texts(at))  # no reference answer on the page
    for answer in ("yes", "yes"):  # agrees on the first image, not on the second
        _by_label(at.button, "Yes").click().run()  # a decision is one button (with its keyboard shortcut)
        said = _plain(at.success[0].value)  # names the item saved: it shows above the next item's button
        assert said.startswith(f"Answer “{answer}” saved for the previous item ") and said.endswith(f" ({question}).")
    assert _plain(at.info[0].value) == "Nothing to review in counting."
    at = _signed_in(tokens["carol"], page="Admin")
    assert len(at.get("vega_lite_chart")) >= 2  # progress per mode: tasks and ready questions
    at.radio(key="admin_section").set_value("Agreement").run()
    # agreement, disagreements, label agreement; cells are escaped Markdown
    tables = [t.value.map(lambda v: _plain(v) if isinstance(v, str) else v) for t in at.main.table]
    table = next(t for t in tables if "kappa" in t.columns)
    row = table[table["mode"] == "counting"].iloc[0]
    # items: (yes, yes) and (no, yes): p_o = 1/2, p_e = (1*2 + 1*0) / 4 = 1/2 -> kappa 0
    assert (row["statistic"], float(row["kappa"]), row["items"], row["raters"], row["disagreements"]) == (
        "cohen",
        0.0,
        2,
        2,
        1,
    )
    other = table[table["mode"] == "color"].iloc[0]
    assert (other["statistic"], other["kappa"]) == ("-", "-")  # no figure yet: "-", never "None"
    dis = next(t for t in tables if "answers" in t.columns)
    assert list(dis["answers"]) == ["alice: no; bob: yes"] and list(dis["question"]) == [question]
    raw = next(t.value for t in at.main.table if "answers" in t.value.columns)
    assert "\\*\\*cats\\*\\*" in raw["question"][0]  # worker text shows literally, never as Markdown
    assert len(at.get("vega_lite_chart")) >= 1  # agreement per mode as a chart


def test_label_model_answers(env):
    store, tokens = env
    item = C.next_item(store, "alice", "counting")
    saved = C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
    rid = C.work.add_response(store, saved.instance_ids[0], "secret-model-name", "How many cats?", "Seven cats.")
    at = _signed_in(tokens["bob"], page="Label answers", mode="counting")
    assert "Seven cats." in [t.value for t in at.text] and not any("secret-model-name" in t for t in _texts(at))
    _by_label(at.button, "Hallucinated").click().run()
    assert (
        _plain(at.success[0].value)
        == "Verdict saved for the previous answer (hallucinated: How many cats are there in the picture?)."
    )
    assert _plain(at.info[0].value) == "No model answers to label in counting."
    assert C.work.next_response(store, "bob") is None and C.work.next_response(store, "carol").response_id == rid


def test_cli_curate_names_a_missing_app(tmp_path):
    from typer.testing import CliRunner

    from vhmine.cli import app

    r = CliRunner().invoke(app, ["curate", "--db", str(tmp_path / "x.db"), "--app", str(tmp_path / "nope.py")])
    assert r.exit_code == 2
    assert f"error: the curation app {tmp_path / 'nope.py'} is missing: pass --app PATH" in r.output


def test_messages_show_commands_as_code_never_as_literal_backticks():
    from vhmine.apps.page_helpers import esc

    assert esc("run `vhmine workers add NAME` first.") == "run `vhmine workers add NAME` first\\."
    assert esc("**x** `a*b` <b>") == "\\*\\*x\\*\\* `a*b` \\<b\\>"  # worker text outside stays literal
    assert esc("a lone ` backtick") == "a lone \\` backtick"
