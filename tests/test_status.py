"""vhmine.status and `vhmine status`: what a working folder holds, and the next step at each stage of a
project, on real stage outputs; read only; fast on a store of 10,000 tasks (scripts/bench_status.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import NO_APP_EXTRA, counting_annotation, run_vhmine, write_pairs, write_photos

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _tree(folder: Path) -> dict:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _index(folder: Path, photos: list[Path]):
    """indexes/photos as `vhmine embed` writes it, over `photos`, with vectors whose pairs are known."""
    from vhmine.images import sha256_file
    from vhmine.index import write_index

    shas = [sha256_file(p) for p in photos]
    rng = np.random.default_rng(0)
    clip = rng.normal(size=(len(photos), 6)).astype(np.float32)
    clip /= np.linalg.norm(clip, axis=1, keepdims=True)
    images = pd.DataFrame(
        {
            "image_id": [s[:16] for s in shas],
            "path": [p.name for p in photos],
            "sha256": shas,
            "width": 96,
            "height": 96,
            "coco_id": pd.array([None] * len(photos), dtype="Int64"),
            "categories": [[] for _ in photos],
        }
    )
    write_index(
        folder / "indexes" / "photos",
        images,
        clip,
        clip[::-1].copy(),
        skipped=pd.DataFrame({"path": ["bad.png"], "reason": ["truncated file"]}),
        manifest={
            "producer": "vhmine embed",
            "name": "photos",
            "root": str(photos[0].parent.resolve()),
            "encoders": {"clip": {"spec": "local-dir:tiny-clip", "dim": 6}, "dino": {"spec": "tiny-dino", "dim": 6}},
            "counts": {"images": len(photos), "skipped": 1, "duplicates": 0},
        },
    )


def test_the_next_step_follows_the_project_from_an_empty_folder_to_an_eval(tmp_path, monkeypatch):
    from vhmine import api
    from vhmine import curate as C
    from vhmine.status import collect
    from vhmine.store import open_store

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VHMINE_DB", raising=False)
    st = collect()
    assert st.next_step.startswith("vhmine embed FOLDER --name NAME")
    assert st.store is None and not (tmp_path / "data").exists()  # nothing created

    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket", "horse"))
    _index(tmp_path, photos)
    st = collect()
    assert [(i.name, i.images, i.skipped, i.clip, i.dino) for i in st.indexes] == [
        ("photos", 4, 1, "local-dir:tiny-clip", "tiny-dino")
    ]
    assert st.next_step == "vhmine mine --index photos"

    from vhmine.index import open_index
    from vhmine.mine.join.simsearch import brute_force_pairs

    idx = open_index(Path("indexes"), "photos")
    low = float(brute_force_pairs(idx.clip, idx.dino, -1.0).dino_sim.min())
    dino = round(np.floor(low * 10) / 10 - 0.05, 2)  # below every pair's DINOv2: nothing passes
    res = api.mine("photos", clip=-1.0, dino=dino, progress=False)
    assert res.written == 0
    st = collect()
    run = f"photos-clip-1-dino{dino:g}"
    assert [(r.name, r.pairs) for r in st.runs] == [(run, 0)]
    # the command it names is the one the run's own summary suggests
    relax = (
        next(ln for ln in res.summary().splitlines() if ln.startswith("relax: "))
        .split("  (")[0]
        .removeprefix("relax: ")
    )
    assert st.next_step.startswith(relax + f"   (the last run, {run}, found 0 pairs)"), (st.next_step, relax)

    api.mine("photos", clip=-1.0, dino=1.0, progress=False)  # every pair: thresholds mine warns about
    assert collect().next_step == (
        "vhmine mine --index photos   (run photos-clip-1-dino1 was mined with --dino 1.0 >= --clip -1.0, which mine"
        " warned about: not one to seed)"
    )
    api.seed("runs/photos-clip-1-dino1/pairs.parquet", per_mode=2, modes=["counting"])  # seeded all the same
    st = collect()
    assert st.runs[-1].seeded and st.store["tasks"] == 2
    assert st.next_step.startswith("vhmine workers add NAME   (")
    with open_store(None) as store:
        C.add_worker(store, "alice")
    assert collect().next_step.startswith("vhmine curate   (2 task(s) left to annotate")
    with open_store(None) as store:
        item = C.next_item(store, "alice", "counting")
        C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
        C.confirm_drafts(
            store,
            "alice",
            [C.DraftDecision(d.instance_id, True) for d in C.pending_drafts(store, "alice")],
        )
        ready = len(C.ready_instances(store))
    st = collect()
    counting = next(m for m in st.store["modes"] if m["mode"] == "counting")
    assert (counting["open"], counting["done"], counting["ready"]) == (1, 1, ready)
    # every mode is short of the 783 ready instances that tell two models 5 points apart (rules.sample_size)
    assert st.store["sample_size"]["needed"] == 783 and st.store["sample_size"]["short_modes"]["counting"] == ready
    short = next(line for line in st.text().splitlines() if "ready instances per mode" in line)
    assert short.startswith(f"  {len(st.store['modes'])} of {len(st.store['modes'])} mode(s) have fewer than the 783")
    assert f"counting {ready}" in short
    assert st.next_step.startswith(
        f"vhmine export --format vhtest --out benchmarks/vh-v1   ({ready} question(s) ready)"
    )

    api.export("benchmarks/vh-v1", "vhtest", near_dups=None)
    st = collect()
    assert [(e.folder, e.format, e.version, e.items) for e in st.exports] == [
        ("benchmarks/vh-v1", "vhtest", "1", ready)
    ]
    assert st.next_step.startswith("vhmine eval --bench benchmarks/vh-v1 --model MODEL")
    bench = api.read_benchmark("benchmarks/vh-v1")
    (tmp_path / "p.jsonl").write_text("".join(json.dumps({"id": it.id, "answer": "3"}) + "\n" for it in bench))
    api.evaluate("benchmarks/vh-v1", "evals/e1", predictions=[("m", "p.jsonl")])
    st = collect()
    assert [(e.folder, e.items, list(e.models)) for e in st.evals] == [("evals/e1", ready, ["m"])]
    assert st.next_step == "vhmine curate   (1 task(s) left to annotate)"
    text = st.text()
    assert "  photos: 4 images, 1 skipped; encoders local-dir:tiny-clip + tiny-dino" in text
    assert "  benchmarks/vh-v1: vhtest, version 1," in text and "evals/e1/report.md" in text


@pytest.mark.slow
def test_status_reads_only_and_is_fast_on_a_store_of_10000_tasks(tmp_path):
    sys.path.insert(0, str(SCRIPTS))
    try:
        import bench_status
    finally:
        sys.path.remove(str(SCRIPTS))
    held = bench_status.build(tmp_path)
    before = _tree(tmp_path)
    from vhmine.status import collect

    t0 = time.perf_counter()
    st = collect(tmp_path, indexes=tmp_path / "indexes", db=held["db"])
    took = time.perf_counter() - t0
    assert st.store["tasks"] == 10_000
    assert sum(m["done"] for m in st.store["modes"]) == held["done"]
    assert sum(m["discarded"] for m in st.store["modes"]) == 1
    assert sum(m["ready"] for m in st.store["modes"]) == held["ready"]
    assert took < 2.0, f"collect took {took:.2f} s"
    # the command, as a user runs it (a new process, imports included): the same figures as JSON
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-m", "vhmine.cli", "status", "--json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["store"]["tasks"] == 10_000 and rec["runs"][0]["seeded"] is True
    assert rec["next_step"].startswith("vhmine export --format vhtest")
    print(f"vhmine status --json: {took:.2f} s")
    assert _tree(tmp_path) == before  # nothing written, not even the store's -wal


def test_status_does_not_migrate_an_older_store(tmp_path):
    from vhmine.status import collect
    from vhmine.store import open_store

    open_store(tmp_path / "old.db", target="0001").close()
    before = _tree(tmp_path)
    st = collect(tmp_path, db=str(tmp_path / "old.db"))
    assert "has schema revision 0001" in st.store["problem"] and "migrates it" in st.store["problem"]
    assert _tree(tmp_path) == before


# --- read only, whatever the store's journal mode; without the app extra; a damaged store ------------------


def _listing(folder: Path) -> dict:
    """Every file and folder under `folder`: a file's bytes' sha256, and the permission bits of each."""
    import os

    return {
        p.relative_to(folder).as_posix(): (
            p.is_file() and hashlib.sha256(p.read_bytes()).hexdigest(),
            os.stat(p).st_mode,
        )
        for p in sorted(folder.rglob("*"))
    }


def _journal_mode(file: Path) -> str:
    """From the file's header (its write version: 1 rollback journal, 2 WAL), opening nothing."""
    return {1: "rollback", 2: "wal"}[file.read_bytes()[18]]


def test_status_leaves_a_rollback_journal_store_a_wal_store_and_an_empty_file_as_they_were(tmp_path):
    import shutil
    import sqlite3

    from vhmine.status import collect
    from vhmine.store import open_store

    wal = tmp_path / "wal" / "vhmine.db"
    open_store(wal).close()
    rollback = tmp_path / "rollback" / "vhmine.db"
    rollback.parent.mkdir()
    shutil.copy(wal, rollback)
    con = sqlite3.connect(rollback)
    assert con.execute("PRAGMA journal_mode=DELETE").fetchone()[0] == "delete"
    con.close()
    empty = tmp_path / "empty" / "vhmine.db"
    empty.parent.mkdir()
    empty.touch()
    (tmp_path / "rollback").chmod(0o750)
    rollback.chmod(0o640)
    before = _listing(tmp_path)
    modes = {f: _journal_mode(f) for f in (wal, rollback)}
    assert modes == {wal: "wal", rollback: "rollback"}

    seen = {f: collect(tmp_path, db=str(f)).store for f in (wal, rollback, empty)}
    runs = {f: run_vhmine("status", "--db", str(f), cwd=tmp_path) for f in (wal, rollback, empty)}  # as a user does
    assert _listing(tmp_path) == before  # bytes, permissions, no -wal / -shm / -journal left beside them
    assert {f: _journal_mode(f) for f in (wal, rollback)} == modes
    assert empty.stat().st_size == 0
    assert seen[wal]["tasks"] == seen[rollback]["tasks"] == 0
    assert "is empty" in seen[empty]["problem"]
    assert all(r.returncode == 0 for r in runs.values()), {f: r.stderr for f, r in runs.items()}


def test_status_without_the_app_extra_shows_indexes_runs_exports_and_evals_and_what_the_store_needs(
    tmp_path, monkeypatch
):
    import os

    from vhmine import api
    from vhmine import curate as C
    from vhmine.store import open_store

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VHMINE_DB", raising=False)
    _index(tmp_path, write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket", "horse")))
    api.mine("photos", clip=-1.0, dino=1.0, progress=False)
    api.seed("runs/photos-clip-1-dino1/pairs.parquet", per_mode=1, modes=["counting"])
    with open_store(None) as store:
        C.add_worker(store, "alice")
        item = C.next_item(store, "alice", "counting")
        C.save_annotation(store, "alice", item.task_id, counting_annotation(item))
        C.confirm_drafts(
            store,
            "alice",
            [C.DraftDecision(d.instance_id, True) for d in C.pending_drafts(store, "alice")],
        )
    api.export("benchmarks/vh-v1", "vhtest", near_dups=None)
    (tmp_path / "p.jsonl").write_text(
        "".join(json.dumps({"id": it.id, "answer": "3"}) + "\n" for it in api.read_benchmark("benchmarks/vh-v1"))
    )
    api.evaluate("benchmarks/vh-v1", "evals/e1", predictions=[("m", "p.jsonl")])
    blocker = tmp_path / "no-app-extra"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(NO_APP_EXTRA)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")]))
    check = subprocess.run([sys.executable, "-c", "import sqlalchemy"], capture_output=True, text=True)
    assert check.returncode == 1 and "No module named 'sqlalchemy'" in check.stderr  # the blocker works

    r = run_vhmine("status", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "  photos: 4 images, 1 skipped; encoders local-dir:tiny-clip + tiny-dino" in lines
    assert any(ln.startswith("  photos-clip-1-dino1: --clip -1 --dino 1, ") for ln in lines)
    assert any(ln.startswith("  benchmarks/vh-v1: vhtest, version 1, ") for ln in lines)
    assert any(ln.startswith("  evals/e1/report.md: ") and "m " in ln for ln in lines)
    assert (
        "store: data/vhmine.db: the curation store needs sqlalchemy: pip install 'vhmine[app]' "
        "(only the store's counts need it)"
    ) in lines
    assert "next: pip install 'vhmine[app]'   (the store's counts need it; then `vhmine status` again)" in lines
    rec = json.loads(run_vhmine("status", "--json", cwd=tmp_path).stdout)
    assert rec["store"]["needs"] == "pip install 'vhmine[app]'" and len(rec["evals"]) == 1


def _damaged_pages(db: Path, keep: set[int]) -> None:
    """Overwrite every page of a SQLite file but those in `keep` (1-based) with noise."""
    import random

    data = bytearray(db.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    rng = random.Random(0)
    for page in range(len(data) // size):
        if page + 1 not in keep:
            data[page * size : (page + 1) * size] = bytes(rng.randrange(256) for _ in range(size))
    db.write_bytes(bytes(data))


@pytest.mark.slow
def test_a_damaged_store_is_one_line_naming_the_file_for_status_and_every_command_that_opens_it(tmp_path):
    import sqlite3

    from vhmine.store import open_store

    noise = tmp_path / "noise.db"  # not a database at all
    noise.write_bytes(bytes(range(256)) * 32)
    broken = tmp_path / "broken.db"  # a vhmine store whose workers table (only) is damaged: found when read
    with open_store(broken):
        pass
    con = sqlite3.connect(broken)
    con.execute("PRAGMA journal_mode=DELETE")
    pages = {n for (n,) in con.execute("SELECT rootpage FROM sqlite_master WHERE name != 'workers'")}
    con.close()
    _damaged_pages(broken, pages | {1})
    pairs = write_pairs(tmp_path / "runs" / "t", write_photos(tmp_path / "photos", ("astronaut", "coffee")))
    commands = [
        ("status",),
        ("workers", "list"),
        ("workers", "add", "bob"),
        ("seed", "--pairs", str(pairs)),
        ("export", "--format", "vhtest", "--out", "b"),
    ]
    for db in (noise, broken):
        for words in commands:
            r = run_vhmine(*words, "--db", str(db), cwd=tmp_path)
            err = r.stderr.strip().splitlines()
            said = (words, db.name, r.returncode, r.stderr)
            assert r.returncode == 2 and len(err) == 1, said
            assert err[0].startswith(f"error: the store {db} is not a SQLite database vhmine can read"), said
            assert "Background on this error" not in r.stderr and "DatabaseError" not in r.stderr, said
        if db is noise:  # status shows the rest, and the store line says the same
            r = run_vhmine("status", "--db", str(db), cwd=tmp_path)
            assert r.stdout.splitlines()[0].startswith("indexes: none") and "store: noise.db: the store " in r.stdout


# --- no printed form of a URL holds its secrets -------------------------------------------------------------

_SAFE_RAW = "abcXYZ019-._~!$'()*+,:/?#[]%= "  # characters a password may hold as typed (no `@`: see below)


def _secret(marker: str):
    """A secret that no other part of a generated URL can spell: a marker the rest never holds, then anything."""
    from hypothesis import strategies as st

    return st.builds(
        lambda rest: marker + rest, st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)
    )


def _urls():
    """(url, secrets) over store and endpoint URLs: users, passwords typed raw or percent-encoded with special
    characters, and credential query parameters beside harmless ones."""
    from urllib.parse import quote

    from hypothesis import strategies as st

    def build(scheme, user, pw, raw_pw, params, harmless, at_in_pw):
        secrets = [pw]
        if raw_pw:
            pw = "".join(c if c in _SAFE_RAW or c.isalnum() else quote(c, safe="") for c in pw)
            if at_in_pw:  # an `@` typed as is: SQLAlchemy and urllib split it otherwise; vhmine still hides it
                pw = pw[:3] + "@" + pw[3:]
                secrets = [pw]
        else:
            pw = quote(pw, safe="")
        query = [f"{k}={quote(v, safe='')}" for k, v in params] + list(harmless)
        secrets += [v for _, v in params]
        return f"{scheme}://{user}:{pw}@127.0.0.1:1/db" + ("?" + "&".join(query) if query else ""), secrets

    return st.builds(
        build,
        st.sampled_from(["postgresql", "postgresql+psycopg", "mysql+nodriver", "http", "https"]),
        st.text("abcdefgh_.", min_size=1, max_size=6),
        _secret("Zq9"),
        st.booleans(),
        st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "password",
                        "api_key",
                        "token",
                        "access_token",
                        "sslpassword",
                        "secret",
                        "apikey",
                        "api-key",
                        "sig",
                    ]
                ),
                _secret("Wv8"),
            ),
            max_size=3,
        ),
        st.lists(st.sampled_from(["sslmode=disable", "application_name=vh", "connect_timeout=1"]), max_size=2),
        st.booleans(),
    )


def test_property_no_printed_form_of_a_url_holds_its_password_or_credential_parameters(tmp_path, monkeypatch):
    from urllib.parse import quote, unquote

    from hypothesis import given

    from vhmine.files import display_url, without_secrets
    from vhmine.llm import safe_endpoint
    from vhmine.status import collect

    monkeypatch.chdir(tmp_path)

    @given(_urls())
    def check(case):
        url, secrets = case
        printed = {
            "display_url": display_url(url),
            "message": without_secrets(f"could not connect with {url} ({' '.join(secrets)})", url),
        }
        if url.startswith("http"):
            printed["endpoint"] = safe_endpoint(url)
        elif url.count("@") == 1:  # the status of a server that cannot be reached, as text and as --json
            st = collect(tmp_path, db=url)
            assert st.store["problem"], st.store
            printed["status"] = st.text()
            printed["json"] = json.dumps(st.record(), ensure_ascii=False)
            printed["json-ascii"] = json.dumps(st.record())
        for where, text in printed.items():
            for s in secrets:
                for form in {s, unquote(s), quote(s, safe="")}:
                    assert form not in text, (where, form, text)
        assert printed["display_url"].split("://")[0] == url.split("://")[0]  # still says what it is

    check()


def test_a_password_with_an_at_sign_typed_as_is_is_hidden_whole():
    """An example of what the property covers: the password runs to the last `@`."""
    from vhmine.files import display_url

    assert (
        display_url("postgresql://ann:p@ss/w?rd@db.example:5432/vh?sslmode=require&password=x%26y")
        == "postgresql://ann:***@db.example:5432/vh?sslmode=require&password=***"
    )


def test_status_imports_no_library_it_does_not_need(tmp_path):
    """What keeps `vhmine status` quick on a loaded machine (scripts/bench_status.py times it): with a store, no
    Alembic (nor its Mako), numpy, PIL, pandas or torch is imported; without one, not even SQLAlchemy."""
    from vhmine.store import open_store

    open_store(tmp_path / "data" / "vhmine.db").close()

    def imported(*words):
        r = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "vhmine.cli", "status", *words],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr
        return {
            ln.split("|")[-1].strip().split(".")[0] for ln in r.stderr.splitlines() if ln.startswith("import time:")
        }

    with_store = imported("--db", "data/vhmine.db")
    assert "sqlalchemy" in with_store  # the store's counts were read
    assert not with_store & {"alembic", "mako", "numpy", "PIL", "pandas", "pyarrow", "torch"}
    assert not imported("--db", "none.db") & {"sqlalchemy", "alembic", "numpy", "PIL", "pandas"}


def test_an_index_grown_since_its_run_is_said_with_the_command_that_reruns_it(tmp_path, monkeypatch):
    """The manifest's sha256 against the newest run's index_manifest_sha256: a grown index is said on the run's
    line and in --json; its rerun is the next step only once annotating (or nothing) is what is left."""
    from vhmine import api
    from vhmine import curate as C
    from vhmine.status import collect
    from vhmine.store import open_store

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VHMINE_DB", raising=False)
    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket", "horse", "camera"))
    _index(tmp_path, photos[:4])
    api.mine("photos", clip=-1.0, dino=1.0, progress=False)
    st = collect()
    assert st.grown == [] and "more images" not in st.text()  # the index is as the run mined it
    _index(tmp_path, photos)  # embed grew it by one image
    st = collect()
    command = "vhmine mine --index photos --clip -1 --dino 1"
    assert st.grown == [
        {
            "index": "photos",
            "run": "photos-clip-1-dino1",
            "run_folder": "runs/photos-clip-1-dino1",
            "images_then": 4,
            "images_now": 5,
            "command": command,
        }
    ]
    line = (
        f"    index 'photos' has 1 more images than when run photos-clip-1-dino1 mined it: `{command}` mines "
        "only what changed"
    )
    lines = st.text().splitlines()
    assert lines[lines.index(line) - 1].startswith("  photos-clip-1-dino1: --clip -1 --dino 1, 6 pairs")
    # mining at thresholds mine does not warn about is more urgent: the rerun is said under also
    assert st.next_step.startswith("vhmine mine --index photos   (run photos-clip-1-dino1 was mined with --dino 1.0")
    assert st.also == [f"index 'photos' changed since its last run: {command}"]
    api.seed("runs/photos-clip-1-dino1/pairs.parquet", per_mode=2, modes=["counting"])
    with open_store(None) as store:
        C.add_worker(store, "alice")
    st = collect()  # annotating is all that is left: the rerun comes first, the annotating after it
    assert st.next_step == f"{command}   (index 'photos' changed since run photos-clip-1-dino1 mined it)"
    assert st.also == ["vhmine curate   (2 task(s) left to annotate; nothing ready to export yet)"]
    r = run_vhmine("status", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["grown"] == st.grown and rec["next_step"] == st.next_step

    api.mine("photos", clip=-0.9176896278695683, dino=1.0, out="runs/exact", progress=False)
    _index(tmp_path, photos[:3])
    cmd = collect().grown[-1]["command"]  # thresholds as they read back, not as :g rounds them
    assert cmd == "vhmine mine --index photos --clip -0.9176896278695683 --dino 1 --out runs/exact"
    _index(tmp_path, photos)
    api.mine("photos", clip=-1.0, dino=1.0, out="runs/custom", max_pairs=3, progress=False)
    st = collect()  # the newest run mined the grown index: only the seeded one's rerun is said
    assert [g["run"] for g in st.grown] == ["photos-clip-1-dino1"] and "than when run custom" not in st.text()
    _index(tmp_path, photos[:3])  # two images removed: the seeded run is the one to rerun, then the newest one
    st = collect()
    assert [(g["run"], g["images_then"], g["images_now"], g["command"]) for g in st.grown] == [
        ("photos-clip-1-dino1", 4, 3, command),
        ("custom", 5, 3, "vhmine mine --index photos --clip -1 --dino 1 --max-pairs 3 --out runs/custom"),
    ]
    assert "    index 'photos' has 2 fewer images than when run custom mined it: `vhmine" in st.text()


def test_status_says_how_many_tasks_are_held_and_why(tmp_path):
    # issue 32: tasks of a missing or changed image leave the queues (curate.work.holds); status says so
    from vhmine import curate as C
    from vhmine.seed import seed_pairs
    from vhmine.status import collect
    from vhmine.store import open_store

    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket"))
    with open_store(tmp_path / "s.db") as store:
        seed_pairs(store, write_pairs(tmp_path / "runs" / "t", photos), per_mode=3, modes=["color"])
        C.add_worker(store, "alice")
        photos[0].unlink()
        assert C.next_item(store, "alice", "color") is not None  # the astronaut's two pairs are held
    st = collect(tmp_path, db=str(tmp_path / "s.db"))
    assert next(m for m in st.store["modes"] if m["mode"] == "color")["held"] == 2 and st.store["tasks"] == 3
    text = st.text()
    assert "  held: 2 task(s) out of the queues while an image is missing or changed (image missing: 2)" in text
    assert any(a.startswith("2 task(s) out of the queues") and "restore the image files" in a for a in st.also)


def _run_printed(step: str, cwd: Path):
    """The command a hint prints (before its "   (" note), run as a user pastes it."""
    import shlex

    words = shlex.split(step.split("   (")[0])
    assert words[0] == "vhmine", step
    return run_vhmine(*words[1:], cwd=cwd)


@pytest.mark.slow
def test_every_command_status_and_export_suggest_works_as_printed(tmp_path, monkeypatch):
    """Issue 33: status's next seed skips a run mine warned about (reversed thresholds) for the one it did not;
    its next export, and export's own hints (unbalanced, an odd --per-mode), are run as printed and succeed."""
    import shlex

    from helpers import make_ready_store

    from vhmine import api
    from vhmine.index import open_index
    from vhmine.mine.join.simsearch import brute_force_pairs
    from vhmine.status import collect
    from vhmine.store import Instance, open_store

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("VHMINE_DB", raising=False)
    photos = write_photos(tmp_path / "photos", ("astronaut", "coffee", "rocket", "horse"))
    _index(tmp_path, photos)
    idx = open_index(Path("indexes"), "photos")
    sims = brute_force_pairs(idx.clip, idx.dino, -1.0)
    k = int(np.argmax(np.asarray(sims.clip_sim) - np.asarray(sims.dino_sim)))  # the pair CLIP finds most alike
    clip, dino = float(sims.clip_sim[k]) - 1e-6, float(sims.clip_sim[k] + sims.dino_sim[k]) / 2
    good = api.mine("photos", clip=clip, dino=dino, out="runs/good", progress=False)
    assert good.written >= 1 and not good.warnings
    api.mine("photos", clip=-1.0, dino=1.0, out="runs/reversed", progress=False)  # newer, more pairs, warned
    st = collect()
    assert st.next_step == "vhmine seed --pairs runs/good/pairs.parquet"
    assert "(mine warned: --dino 1.0 >= --clip -1.0)" in st.text()
    r = _run_printed(st.next_step, tmp_path)
    assert r.returncode == 0, r.stderr
    assert collect().runs[0].seeded

    # a store whose ready yes/no questions are not 50/50: counting keeps 2 yes and 1 no, color 2 and 2
    store = make_ready_store(tmp_path / "ready")
    with store.session() as s:
        s.query(Instance).filter_by(mode="counting", kind="YNQ", truth=False).first().status = "discarded"
    store.close()
    proj = tmp_path / "ready"  # a project of its own: the store's run is there, as `vhmine mine` records it
    _index(proj, photos)
    meta = json.loads((proj / "runs" / "t" / "run.json").read_text())
    (proj / "runs" / "t" / "run.json").write_text(
        json.dumps({**meta, "producer": "vhmine mine", "counts": {"written": 3}})
    )
    monkeypatch.chdir(proj)
    db = ["--db", "store.db"]
    st = collect(db="store.db")
    assert st.next_step.startswith(
        "vhmine export --format vhtest --out benchmarks/vh-v1 --per-mode 2 --db store.db   ("
    )
    r = _run_printed(st.next_step, proj)
    assert r.returncode == 0, r.stderr
    # export's own hints, run as printed (in this process: the CLI as a user runs it, without the start-up)
    from typer.testing import CliRunner

    from vhmine.cli import app

    for extra in ([], ["--per-mode", "5"], ["--per-mode", "4"]):
        cmd = ["export", "--format", "vhtest", "--out", "benchmarks/x", "--replace", "--no-near-dups", *db, *extra]
        r = CliRunner().invoke(app, cmd)
        said = " ".join(r.output.split())
        assert r.exit_code != 0 and "pass --per-mode 2 to sample a balanced subset, or --allow-unbalanced" in said, said
        fixed = [w for w in cmd if w not in extra] + ["--per-mode", "2"]
        r = CliRunner().invoke(app, fixed)
        assert r.exit_code == 0, (shlex.join(fixed), r.output)
    # a mode with no 'no' question left: no --per-mode balances it, and status says --allow-unbalanced
    store = open_store("store.db")
    with store.session() as s:
        s.query(Instance).filter_by(mode="counting", kind="YNQ", truth=False, status="ready").one().status = "discarded"
    store.close()
    shutil.rmtree(proj / "benchmarks")  # as before the first export
    st = collect(db="store.db")
    assert " --allow-unbalanced --db store.db   (" in st.next_step
    r = _run_printed(st.next_step, proj)
    assert r.returncode == 0, r.stderr
