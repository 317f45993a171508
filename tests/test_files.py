"""vhmine.files: folders vhmine did not write are never replaced (the ownership guard, through export, embed and
mine), and files that cost work are on disk (fsync) before the rename that publishes them."""

import hashlib
import os
from pathlib import Path

import pytest
from helpers import copy_photos, embed_options, sha_of
from typer.testing import CliRunner

from vhmine import curate as C
from vhmine.cli import app
from vhmine.embed.job import embed_collection
from vhmine.errors import InputError
from vhmine.export.job import ExportOptions, export_benchmark


def _tree(folder: Path) -> dict:
    """Every file under `folder` with its bytes' sha256: what 'untouched' means. A SQLite store counts by
    its rows (any reader changes its -wal/-shm companions and may checkpoint them into the file)."""
    import sqlite3

    out = {}
    for p in sorted(folder.rglob("*")):
        if not p.is_file() or p.name.endswith(("-wal", "-shm")):
            continue
        if p.suffix == ".db":
            with sqlite3.connect(f"file:{p}?mode=ro", uri=True) as c:
                out[p.relative_to(folder).as_posix()] = hashlib.sha256("\n".join(c.iterdump()).encode()).hexdigest()
        else:
            out[p.relative_to(folder).as_posix()] = sha_of(p)
    return out


# --- 1. only folders vhmine wrote are replaced ------------------------------------------------------


def test_export_replace_refuses_a_folder_holding_a_users_file(mined):
    tmp, _, store = mined
    opts = dict(format="hf", kind="oeq", replace=True)
    mine = tmp / "my-benchmark"
    mine.mkdir()
    (mine / "notes.txt").write_text("a week of notes")
    with pytest.raises(
        InputError,
        match=r"my-benchmark: the folder exists and is not an export that `vhmine export` wrote .*"
        r"it holds notes\.txt\..*choose another --out.*remove that folder yourself",
    ):
        export_benchmark(store, ExportOptions(out=mine, **opts))
    assert (mine / "notes.txt").read_text() == "a week of notes" and [p.name for p in mine.iterdir()] == ["notes.txt"]
    # an earlier export is replaced; one a user has since added a file to is not
    out = tmp / "bench"
    export_benchmark(store, ExportOptions(out=out, **opts))
    export_benchmark(store, ExportOptions(out=out, **opts))
    (out / "data" / "my-labels.csv").write_text("id,label\n")
    before = _tree(out)
    with pytest.raises(
        InputError, match=r"also holds files that vhmine export did not write there \(data/my-labels\.csv\)"
    ):
        export_benchmark(store, ExportOptions(out=out, **opts))
    assert _tree(out) == before
    assert not [p for p in tmp.iterdir() if p.name.startswith((".bench", ".my-benchmark"))]


def test_export_replace_refuses_the_data_folder_that_holds_the_store(mined):
    tmp, _, store = mined
    data = tmp / "data"
    before = _tree(data)
    assert "vhmine.db" in before
    r = CliRunner().invoke(
        app, ["export", "--db", store.url, "--out", str(data), "--format", "hf", "--kind", "oeq", "--replace"]
    )
    assert r.exit_code == 2, r.output
    assert "holds the curation store (vhmine.db" in r.output and "choose another --out" in r.output, r.output
    assert _tree(data) == before
    assert len(C.ready_instances(store)) > 0  # the store is whole
    # the same guard sits in every folder swap: mine --out and the swap itself
    from vhmine.files import replace_dir
    from vhmine.mine import MineOptions, mine_index

    with pytest.raises(InputError, match=r"not a run that `vhmine mine` wrote .*holds the curation store \(vhmine\.db"):
        mine_index(MineOptions(index="p", indexes=tmp / "idx", out=data, progress=False))
    (tmp / "new").mkdir()
    (tmp / "new" / "x.txt").write_text("x")
    with pytest.raises(InputError, match="holds the curation store"):
        replace_dir(tmp / "new", data, producer="vhmine export")
    assert _tree(data) == before and (tmp / "new" / "x.txt").is_file()


def test_embed_never_writes_into_a_folder_that_is_not_an_index(mined, tiny_models):
    """`--indexes . --name data` would put index files into (and delete manifest.json from) the user's folder."""
    tmp, photos, _ = mined
    before = _tree(tmp / "data")
    r = CliRunner().invoke(
        app,
        [
            "embed",
            str(photos),
            "--name",
            "data",
            "--indexes",
            str(tmp),
            "--clip-model",
            tiny_models[0],
            "--dino-model",
            tiny_models[1],
            "--workers",
            "0",
        ],
    )
    assert r.exit_code == 2, r.output
    assert "is not an index that `vhmine embed` wrote" in r.output and "holds the curation store (vhmine.db" in r.output
    assert "choose another --name" in r.output
    assert _tree(tmp / "data") == before


# --- 2. what costs work is on disk before the rename that publishes it ----------------------------


@pytest.fixture
def disk_log(monkeypatch):
    """The order of fsync / rename / replace calls on paths (fsync by file descriptor, read back via /proc)."""
    events = []
    real_fsync, real_replace, real_rename = os.fsync, os.replace, os.rename

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst, *a, **kw):
        events.append(("rename", str(Path(src).resolve()), str(Path(dst).resolve())))
        return real_replace(src, dst, *a, **kw)

    def rename(src, dst, *a, **kw):
        events.append(("rename", str(Path(src).resolve()), str(Path(dst).resolve())))
        return real_rename(src, dst, *a, **kw)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "rename", rename)
    return events


def _published_after_fsync(events, final: Path):
    """The rename that put `final` in place came after an fsync of the renamed file (or of every file
    of the renamed folder), and the folder that holds `final` was fsynced after it."""
    final = str(final.resolve())
    k = max(i for i, e in enumerate(events) if e[0] == "rename" and e[2] == final)
    src = events[k][1]
    synced = [e[1] for e in events[:k] if e[0] == "fsync"]
    assert src in synced, f"{src} was not fsynced before it became {final}: {events}"
    assert ("fsync", str(Path(final).parent)) in events[k + 1 :], (
        f"the folder of {final} was not fsynced after: {events}"
    )
    return src, synced


def test_index_manifest_export_and_run_are_flushed_before_they_are_published(mined, disk_log):
    tmp, _, store = mined
    from vhmine.files import atomic_write_text

    atomic_write_text(tmp / "idx" / "p" / "note.json", "{}")
    _published_after_fsync(disk_log, tmp / "idx" / "p" / "note.json")
    disk_log.clear()
    export_benchmark(store, ExportOptions(out=tmp / "bench", format="hf", kind="oeq"))
    src, synced = _published_after_fsync(disk_log, tmp / "bench")
    for name in ("manifest.json", "data/oeq/test-00000-of-00001.parquet", "croissant.json", "README.md"):
        assert f"{src}/{name}" in synced
    disk_log.clear()
    export_benchmark(store, ExportOptions(out=tmp / "bench", format="hf", kind="oeq", replace=True))
    _published_after_fsync(disk_log, tmp / "bench")


def test_embed_manifest_is_flushed_before_it_is_published(tmp_path, photos_dir, tiny_models, disk_log):
    photos = copy_photos(tmp_path / "photos", photos_dir)
    embed_collection(embed_options(photos, tmp_path / "idx", tiny_models, name="c"))
    for name in (
        "manifest.json",
        "images.parquet",
        "clip.faiss",
        "work/plan.parquet",
        "work/shards/part-00000.parquet",
    ):
        _published_after_fsync(disk_log, tmp_path / "idx" / "c" / name)


def test_store_backup_is_flushed_before_it_takes_its_name(tmp_path, disk_log):
    from vhmine.store import open_store

    db = tmp_path / "old.db"
    open_store(db, target="0001").close()
    disk_log.clear()
    open_store(db).close()  # migrating: the old file is copied to old.db.bak-0001 first
    bak = tmp_path / "old.db.bak-0001"
    assert bak.is_file()
    _published_after_fsync(disk_log, bak)
    import sqlite3

    with sqlite3.connect(bak) as con:  # a whole database, not a half copy
        assert con.execute("pragma integrity_check").fetchone() == ("ok",)


def test_atomic_write_gives_the_file_the_mode_the_umask_gives_a_new_file(tmp_path):
    """mkstemp makes 0600: a report on a shared server could not be read by the team (eval), while export's 0644."""
    import os
    import stat

    from vhmine.files import atomic_write_text, current_umask

    old = os.umask(0o022)
    try:
        assert current_umask() == 0o022
        atomic_write_text(tmp_path / "a.txt", "x")
        (tmp_path / "b.txt").write_text("x")  # what a plain write gives
        os.umask(0o077)
        atomic_write_text(tmp_path / "c.txt", "x")
    finally:
        os.umask(old)
    mode = lambda n: stat.S_IMODE((tmp_path / n).stat().st_mode)  # noqa: E731
    assert (mode("a.txt"), mode("b.txt"), mode("c.txt")) == (0o644, 0o644, 0o600)
