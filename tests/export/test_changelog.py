"""Export versions and the `--since` changelog (issue 10): every export has a version and a content hash;
`vhmine export --since DIR` lists the items added, removed and changed against an earlier export, each
with who and why from the store's action log, workers as pseudonyms unless --with-provenance.

The store is made with the curation library; the erratum is logged the way the app's errata flow logs
an admin's decision (an `errata_accept` action naming the instance, the reason and the fields changed,
with the instance corrected in the same transaction). Exports run through the real CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import write_pairs, write_photos

WORKERS = ("alice", "bob", "carol", "dave")


def _vhmine(cwd, *args, ok=True):
    r = subprocess.run(
        [sys.executable, "-m", "vhmine.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )
    if ok:
        assert r.returncode == 0, f"vhmine {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def _annotate(store, worker, mode, tpl, slots, a, b):
    from vhmine import curate as C

    item = C.next_item(store, worker, mode)
    ia, ib = (v.id for v in item.images)
    saved = C.save_annotation(store, worker, item.task_id, C.Annotation(tpl, slots, answers={ia: a, ib: b}))
    C.confirm_drafts(store, worker, [C.DraftDecision(d, True) for d in saved.draft_ids])
    return saved


def _erratum(store, admin, instance_id, answers, reason, flagged_by):
    """An admin accepts a worker's flag: the instance is corrected and the decision logged."""
    from vhmine.store import Action, Instance, utcnow

    with store.session() as s:
        inst = s.get(Instance, instance_id)
        before = list(inst.answers)
        inst.answers, inst.updated_by, inst.updated_at = answers, admin, utcnow()
        s.add(
            Action(
                worker=admin,
                kind="errata_accept",
                task_id=inst.task_id,
                created_at=utcnow(),
                payload={
                    "instance_id": instance_id,
                    "reason": reason,
                    "flagged_by": flagged_by,
                    "changes": {"answers": [before, answers]},
                },
            )
        )


@pytest.fixture()
def workdir(tmp_path):
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    store = open_store(tmp_path / "store.db")
    seed_pairs(
        store,
        write_pairs(tmp_path / "runs" / "t", write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket"))),
        per_mode=2,
        modes=["counting", "color"],
    )
    for w in WORKERS:
        C.add_worker(store, w, admin=(w == "carol"))
    first = _annotate(store, "alice", "counting", "counting.how_many", {"object": "cats"}, "3", "2")
    _annotate(store, "bob", "color", "color.what_color", {"object": "cup"}, "red", "blue")
    store.close()
    return tmp_path, first


@pytest.mark.slow
def test_changelog_since_an_earlier_export(workdir):
    from vhmine import curate as C
    from vhmine.export.privacy import pseudonym, pseudonym_key
    from vhmine.store import open_store

    tmp, first = workdir
    db = str(tmp / "store.db")
    _vhmine(tmp, "export", "--db", db, "--out", "v1", "--version", "1.0.0")
    m1 = json.loads((tmp / "v1" / "manifest.json").read_text())
    assert m1["version"] == "1.0.0" and len(m1["content_hash"]) == 64 and "since" not in m1
    assert not (tmp / "v1" / "CHANGELOG.md").exists()

    fixed = first.instance_ids[0]  # alice's "how many cats" on image A: 3 -> 4
    with open_store(db) as store:
        _erratum(store, "carol", fixed, ["4"], "one cat hides behind the chair: 4, not 3", flagged_by="dave")
        C.undo_last(store, "bob")  # bob takes back his confirmation of the color yes/no questions: 4 leave
        added = _annotate(store, "alice", "counting", "counting.how_many", {"object": "dogs"}, "1", "2")
        key = pseudonym_key(store)
    r = _vhmine(tmp, "export", "--db", db, "--out", "v2", "--since", "v1")
    assert "version 1.1.0: 6 added, 4 removed, 1 changed since 1.0.0 (CHANGELOG.md)" in r.stdout

    m2 = json.loads((tmp / "v2" / "manifest.json").read_text())
    assert m2["version"] == "1.1.0"  # items came and went: semver minor
    assert m2["content_hash"] != m1["content_hash"]
    assert {k: m2["since"][k] for k in ("version", "path", "added", "removed", "changed")} == {
        "version": "1.0.0",
        "path": "v1",
        "added": 6,
        "removed": 4,
        "changed": 1,
    }
    assert {"CHANGELOG.md", "changelog.json"} <= set(m2["files"])  # checksummed like every other file

    log = json.loads((tmp / "v2" / "changelog.json").read_text())
    pa, pb, pc, pd = (pseudonym(w, key) for w in WORKERS)
    (ch,) = log["changed"]
    assert ch["id"] == fixed and ch["fields"] == {"answers": [["3"], ["4"]]}
    assert ch["by"] == [pc] and ch["why"] == ["one cat hides behind the chair: 4, not 3"]
    assert ch["actions"][0]["kind"] == "errata_accept" and ch["actions"][0]["details"]["flagged_by"] == pd
    assert sorted(e["id"] for e in log["added"]) == sorted(added.instance_ids + added.draft_ids)
    assert all(e["by"] == [pa] and "question written" in e["why"] for e in log["added"])
    assert all("yes/no draft confirmed" in e["why"] for e in log["added"] if e["kind"] == "YNQ")
    assert len(log["removed"]) == 4
    for e in log["removed"]:
        assert e["mode"] == "color" and e["kind"] == "YNQ" and e["by"] == [pb]
        assert "confirm undone" in e["why"] and e["state"] == "draft"

    md = (tmp / "v2" / "CHANGELOG.md").read_text()
    assert md.startswith("# v2 1.1.0: changes since 1.0.0")
    assert (
        f"| {fixed} | counting | OEQ | How many cats are there in the picture? | answers: ['3'] → ['4'] | {pc} | "
        "one cat hides behind the chair: 4, not 3 |" in md
    )
    for text in (md, (tmp / "v2" / "changelog.json").read_text(), (tmp / "v2" / "manifest.json").read_text()):
        for w in WORKERS:  # no worker's name in an export without --with-provenance (reasons and payloads too)
            assert w not in text

    # with --with-provenance the names stay; a version that does not come after the earlier one is refused
    _vhmine(
        tmp, "export", "--db", db, "--out", "v2-internal", "--since", "v1", "--version", "1.1.0", "--with-provenance"
    )
    internal = json.loads((tmp / "v2-internal" / "changelog.json").read_text())
    assert (
        internal["changed"][0]["by"] == ["carol"]
        and internal["changed"][0]["actions"][0]["details"]["flagged_by"] == "dave"
    )
    bad = _vhmine(tmp, "export", "--db", db, "--out", "v-bad", "--since", "v1", "--version", "1.0.0", ok=False)
    assert bad.returncode == 2 and "--version 1.0.0 does not come after version 1.0.0 of v1" in bad.stderr
    assert not (tmp / "v-bad").exists()


@pytest.mark.slow
def test_integer_versions_count_up_and_the_hash_ignores_format_and_provenance(workdir):
    tmp, first = workdir
    db = str(tmp / "store.db")
    _vhmine(tmp, "export", "--db", db, "--out", "a", "--format", "hf")
    _vhmine(tmp, "export", "--db", db, "--out", "b", "--format", "vhtest", "--with-provenance", "--since", "a")
    _vhmine(tmp, "export", "--db", db, "--out", "c", "--format", "vlmevalkit", "--since", "b")
    ma, mb, mc = (json.loads((tmp / d / "manifest.json").read_text()) for d in "abc")
    assert (ma["version"], mb["version"], mc["version"]) == ("1", "2", "3")
    assert ma["content_hash"] == mb["content_hash"] == mc["content_hash"]  # the same items
    log = json.loads((tmp / "c" / "changelog.json").read_text())
    assert log["counts"] == {"added": 0, "removed": 0, "changed": 0} and log["since"]["same_store"] is True
    assert "0 added, 0 removed, 0 changed" in (tmp / "c" / "CHANGELOG.md").read_text()
    bad = _vhmine(tmp, "export", "--db", db, "--out", "d", "--version", "v2", ok=False)
    assert bad.returncode == 2 and "--version 'v2' is neither an integer (3) nor semver (1.2.0)" in bad.stderr
    bad = _vhmine(tmp, "export", "--db", db, "--out", "d", "--since", "photos", ok=False)
    assert bad.returncode == 2 and "--since photos: no manifest.json there" in bad.stderr


@pytest.mark.slow
def test_names_are_whole_tokens_and_a_name_that_is_a_content_word_stays_a_word(workdir):
    """Workers called "ann." and "lee-" (registered before names had to end with a letter or digit) and "red":
    without --with-provenance no name is left in CHANGELOG.md or changelog.json, and the colour "red" in the
    reasons and changes stays "red" (it is the item's answer), while "by red" is the worker."""
    from vhmine import curate as C
    from vhmine.export.privacy import pseudonym, pseudonym_key
    from vhmine.store import Instance, Worker, open_store, utcnow

    tmp, first = workdir
    db = str(tmp / "store.db")
    with open_store(db) as store:
        with store.session() as s:
            for n in ("ann.", "lee-"):
                s.add(
                    Worker(name=n, token_hash=n, is_admin=False, active=True, created_at=utcnow(), token_generation=0)
                )
        C.add_worker(store, "red")
        key = pseudonym_key(store)
    _vhmine(tmp, "export", "--db", db, "--out", "v1", "--version", "1")
    with open_store(db) as store:
        with store.session(write=False) as s:
            cup = next(
                i for i in s.query(Instance).all() if i.question == "What color is the cup?" and i.answers == ["red"]
            )
        _erratum(
            store,
            "ann.",
            cup.id,
            ["dark red"],
            "the cup is red, darker than that; lee- and red saw it too, ask ann.",
            flagged_by="lee-",
        )
        _erratum(
            store,
            "red",
            first.instance_ids[0],
            ["4"],
            "four cats: counted twice by red, and by lee-.",
            flagged_by="ann.",
        )
    _vhmine(tmp, "export", "--db", db, "--out", "v2", "--since", "v1")

    pann, plee, pred = (pseudonym(n, key) for n in ("ann.", "lee-", "red"))
    log = json.loads((tmp / "v2" / "changelog.json").read_text())
    changed = {e["id"]: e for e in log["changed"]}
    c = changed[cup.id]
    assert c["why"] == [f"the cup is red, darker than that; {plee} and red saw it too, ask {pann}"]
    assert c["by"] == [pann] and c["actions"][0]["details"] == {
        "flagged_by": plee,
        "changes": {"answers": [["red"], ["dark red"]]},
    }
    assert c["fields"] == {"answers": [["red"], ["dark red"]]}
    n = changed[first.instance_ids[0]]
    assert n["why"] == [f"four cats: counted twice by {pred}, and by {plee}."]  # "red" is no word of a counting item
    assert n["by"] == [pred] and n["actions"][0]["details"]["flagged_by"] == pann
    md = (tmp / "v2" / "CHANGELOG.md").read_text()
    for text in (md, (tmp / "v2" / "changelog.json").read_text()):
        for w in ("ann.", "lee-", "alice", "bob", "carol", "dave"):
            assert w not in text
        assert "counted twice by red" not in text and "the cup is red," in text and "dark red" in text
