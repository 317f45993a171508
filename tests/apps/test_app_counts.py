"""Every page tells the truth (issue 42), through Streamlit's AppTest: each work page says how many items are left
there for the worker (Annotate, Label answers, Verify drafts, Errata, Blind flags; Review already did), and the
admin page writes its figures for people: no trailing zeros ("18.9", not "18.9000"), times as hours and minutes
("2 h 15 min", not "0.0000" hours left) and shares as `vhmine draft --stats` writes them ("100.0%", not 1.0)."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("streamlit")

from app_session import signed_in  # noqa: E402
from helpers import flag_color_questions, make_published_store  # noqa: E402

from vhmine import curate as C  # noqa: E402

DURATION = re.compile(r"^(\d+ h( \d+ min)?|\d+ min|under 1 min)$")
PERCENT = re.compile(r"^-?\d+\.\d%$")


def _plain(markdown: str) -> str:
    return re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", markdown)


@pytest.fixture
def published(tmp_path, monkeypatch):
    """make_published_store's store (counting and color written by alice, an existence draft verified by bob), with
    model answers to two color questions, blind flags on color, and a token for each worker."""
    store, ids = make_published_store(tmp_path)
    tokens = {w: C.people.rotate_token(store, w) for w in ("alice", "bob", "carol", "dave")}
    for iid in ids["color"][:2]:
        C.work.add_response(store, iid, "some-vlm", "probe@v1", "yes")
    flag_color_questions(store)  # right without the image: every color question flagged
    monkeypatch.setenv("VHMINE_DB", f"sqlite:///{tmp_path / 'published.db'}")
    yield store, tokens, ids
    store.close()


def _go(at, page: str, mode: str | None = None) -> list[str]:
    """The page's captions (Markdown escaping undone) once `page` of `mode` is shown."""
    at.sidebar.radio(key="page").set_value(page).run()
    if mode:
        at.sidebar.selectbox(key="mode").select(mode).run()
    assert not at.exception, at.exception
    return [_plain(str(c.value)) for c in at.caption]


def test_every_work_page_says_how_many_items_are_left(published):
    store, tokens, ids = published
    at = signed_in(tokens["bob"])
    assert "1 item(s) left to annotate in shape." in _go(at, "Annotate", "shape")  # shape's one pair, now his
    assert "0 item(s) left to annotate in color." in _go(at, "Annotate", "color")
    assert [_plain(i.value) for i in at.info] == ["Nothing left to annotate in color."]  # the count agrees

    assert "2 model answer(s) left to label in color." in _go(at, "Label answers", "color")
    at.button(key=next(b.key for b in at.button if b.key and b.key.startswith("lv:correct:"))).click().run()
    assert "1 model answer(s) left to label in color." in [_plain(str(c.value)) for c in at.caption]
    assert "0 model answer(s) left to label in counting." in _go(at, "Label answers", "counting")

    assert "0 draft(s) left to verify in existence." in _go(at, "Verify drafts", "existence")

    assert "0 of your flags wait for an admin." in _go(at, "Errata")
    C.decisions.flag_instance(store, "bob", ids["color"][0], "the cup is orange")
    assert "1 of your flags wait for an admin." in _go(at, "Annotate") + _go(at, "Errata")

    flags, _ = C.work.flag_count(store, "bob", mode="color")
    assert flags == len(C.work.flag_list(store, "bob", mode="color")) > 0
    assert f"{flags} blind flag(s) in color (0 overruled); all shown." in _go(at, "Blind flags", "color")

    admin = signed_in(tokens["carol"])
    assert "1 flag(s) and 0 changed answer(s) left to decide; 0 of your flags wait for an admin." in _go(
        admin, "Errata"
    )


def _cells(at, column: str) -> dict[str, str]:
    """mode -> the cell of `column` in the admin table that has that column (escaping undone)."""
    [t] = [t for t in at.table if column in t.value.columns]
    return {_plain(str(r["mode"])): _plain(str(r[column])) for r in t.value.to_dict("records")}


def test_the_admin_page_writes_its_figures_for_people(published):
    store, tokens, _ = published
    at = signed_in(tokens["carol"])
    _go(at, "Admin")
    want = {m.mode: m for m in C.people.worker_time(store, 150)}
    left, spent = _cells(at, "time left"), _cells(at, "worker time")
    assert set(left) == set(want)
    for mode, cell in left.items():
        assert cell == ("-" if want[mode].hours_left is None else C.people.duration(want[mode].hours_left)), mode
        assert cell == "-" or DURATION.match(cell), (mode, cell)
        assert DURATION.match(spent[mode]) or spent[mode] == "0 min", (mode, spent[mode])
    per = _cells(at, "s/ready instance")
    assert all(c == "-" or re.fullmatch(r"\d+(\.\d)?", c) for c in per.values()), per  # never "18.9000"

    at.radio(key="admin_section").set_value("Drafts: time saved").run()
    rows = {r.mode: r for r in C.people.draft_savings(store)}
    accept, saving = _cells(at, "accept rate"), _cells(at, "saving")
    assert accept["existence"] == "100.0%"  # bob accepted the one draft: not 1.0
    cli = C.people.savings_table(list(rows.values())).splitlines()
    for mode, r in rows.items():
        assert saving[mode] == C.people.percent(r.saving)  # the one way the CLI writes it too
        assert saving[mode] == "-" or PERCENT.match(saving[mode])
        line = next(x for x in cli if x.split()[0] == mode)
        assert line.split()[-1] == saving[mode]

    at.radio(key="admin_section").set_value("Agreement").run()
    tables = [t.value.to_dict("records") for t in at.table if "kappa" in t.value.columns]  # reviews, labels
    kappas = [_plain(str(r["kappa"])) for rows in tables for r in rows if _plain(str(r["kappa"])) != "-"]
    assert kappas and all(not re.search(r"\.\d*0$", k) for k in kappas), kappas
