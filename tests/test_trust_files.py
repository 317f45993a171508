"""Issue 8, "nothing lost", the file-system side: folders vhmine did not write are never replaced,
embed reruns follow content (changed and deleted files), later stages find images by sha256, files
that cost work are on disk before the rename that publishes them, and a failed embed leaves nothing
that later commands trip over."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image as PILImage
from typer.testing import CliRunner

from vhmine import curate as C
from vhmine.cli import app
from vhmine.embed.job import EmbedOptions, embed_collection
from vhmine.errors import ExportError, IndexMissingError, InputError, StoreError
from vhmine.export.job import ExportOptions, export_benchmark
from vhmine.embed.index import open_index


def _embed_opts(images, indexes, models, **kw):
    clip, dino = models
    return EmbedOptions(images=images, indexes=indexes, clip_model=clip, dino_model=dino, workers=0,
                        batch_size=4, shard_size=3, progress=False, **kw)


def _sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


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
            out[p.relative_to(folder).as_posix()] = _sha(p)
    return out


def _photos(folder: Path, photos_dir: Path, names=("astronaut", "cat", "chelsea", "coffee")) -> Path:
    """A small collection; cat.png and chelsea.png are the same bytes (one image, two paths)."""
    folder.mkdir(parents=True)
    for n in names:
        img = PILImage.open(photos_dir / f"{n}.png")
        img.thumbnail((64, 64))
        img.save(folder / f"{n}.png")
    shutil.copy(folder / "cat.png", folder / "chelsea.png")
    return folder


def _ready_store(db: Path, run_dir: Path, per_mode=3):
    """A store seeded from a real `vhmine mine` run, with every pair of it annotated (ready instances)."""
    from vhmine.seed import seed_pairs
    from vhmine.store import open_store

    store = open_store(db)
    seed_pairs(store, run_dir / "pairs.parquet", per_mode=per_mode, modes=["counting"])
    C.add_worker(store, "alice")
    while (item := C.next_item(store, "alice", "counting")) is not None:
        ids = [v.id for v in item.images]
        C.save_annotation(store, "alice", item.task_id,
                          C.Annotation("counting.how_many", {"object": "cats"}, answers=dict(zip(ids, ["3", "2"]))))
        C.confirm_drafts(store, "alice", [C.DraftDecision(d.instance_id, True)
                                          for d in C.pending_drafts(store, "alice", "counting")])
    return store


@pytest.fixture
def mined(tmp_path, photos_dir, tiny_models):
    """photos/ embedded into idx/p with tiny encoders, every pair mined into runs/r, and a store at
    data/vhmine.db (the default place) seeded from that run with ready instances."""
    from vhmine.mine.job import MineOptions, mine_index

    photos = _photos(tmp_path / "photos", photos_dir)
    embed_collection(_embed_opts(photos, tmp_path / "idx", tiny_models, name="p"))
    mine_index(MineOptions(index="p", indexes=tmp_path / "idx", clip=-1.0, dino=1.0, out=tmp_path / "runs" / "r",
                           progress=False))
    store = _ready_store(tmp_path / "data" / "vhmine.db", tmp_path / "runs" / "r")
    yield tmp_path, photos, store
    store.close()


# --- 1. only folders vhmine wrote are replaced ------------------------------------------------------


def test_export_replace_refuses_a_folder_holding_a_users_file(mined):
    tmp, _, store = mined
    opts = dict(format="hf", kind="oeq", replace=True)
    mine = tmp / "my-benchmark"
    mine.mkdir()
    (mine / "notes.txt").write_text("a week of notes")
    with pytest.raises(InputError, match=r"my-benchmark: the folder exists and is not an export that `vhmine export` wrote .*"
                                         r"it holds notes\.txt\..*choose another --out.*remove that folder yourself"):
        export_benchmark(store, ExportOptions(out=mine, **opts))
    assert (mine / "notes.txt").read_text() == "a week of notes" and [p.name for p in mine.iterdir()] == ["notes.txt"]
    # an earlier export is replaced; one a user has since added a file to is not
    out = tmp / "bench"
    export_benchmark(store, ExportOptions(out=out, **opts))
    export_benchmark(store, ExportOptions(out=out, **opts))
    (out / "data" / "my-labels.csv").write_text("id,label\n")
    before = _tree(out)
    with pytest.raises(InputError, match=r"also holds files that vhmine export did not write there \(data/my-labels\.csv\)"):
        export_benchmark(store, ExportOptions(out=out, **opts))
    assert _tree(out) == before
    assert not [p for p in tmp.iterdir() if p.name.startswith((".bench", ".my-benchmark"))]


def test_export_replace_refuses_the_data_folder_that_holds_the_store(mined):
    tmp, _, store = mined
    data = tmp / "data"
    before = _tree(data)
    assert "vhmine.db" in before
    r = CliRunner().invoke(app, ["export", "--db", store.url, "--out", str(data), "--format", "hf", "--kind", "oeq",
                                 "--replace"])
    assert r.exit_code == 2, r.output
    assert "holds the curation store (vhmine.db" in r.output and "choose another --out" in r.output, r.output
    assert _tree(data) == before
    assert len(C.ready_instances(store)) > 0  # the store is whole
    # the same guard sits in every folder swap: mine --out and the swap itself
    from vhmine.files import replace_dir
    from vhmine.mine.job import MineOptions, mine_index

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
    r = CliRunner().invoke(app, ["embed", str(photos), "--name", "data", "--indexes", str(tmp),
                                 "--clip-model", tiny_models[0], "--dino-model", tiny_models[1], "--workers", "0"])
    assert r.exit_code == 2, r.output
    assert "is not an index that `vhmine embed` wrote" in r.output and "holds the curation store (vhmine.db" in r.output
    assert "choose another --name" in r.output
    assert _tree(tmp / "data") == before


# --- 2. embed reruns follow content; later stages find images by sha256 ---------------------------


def test_embed_rerun_reembeds_a_file_changed_in_place_and_drops_a_deleted_one(tmp_path, photos_dir, tiny_models):
    photos = _photos(tmp_path / "photos", photos_dir, names=("astronaut", "cat", "chelsea", "coffee", "rocket", "horse"))
    opts = _embed_opts(photos, tmp_path / "idx", tiny_models, name="c")
    embed_collection(opts)
    before = open_index(tmp_path / "idx", "c")
    old = {p: _sha(photos / p) for p in ("coffee.png", "rocket.png")}
    rocket = (photos / "rocket.png").read_bytes()
    PILImage.fromarray(np.full((40, 50, 3), 200, np.uint8)).save(photos / "coffee.png")  # same name, new picture
    (photos / "rocket.png").unlink()
    res = embed_collection(opts)
    assert res.embedded_now == 1  # only the changed file is read again
    after = open_index(tmp_path / "idx", "c")
    rows = after.images.set_index("path")
    assert rows.loc["coffee.png", "sha256"] == _sha(photos / "coffee.png")
    assert old["coffee.png"] not in set(after.images["sha256"])  # the old row left the index
    assert "rocket.png" not in rows.index and old["rocket.png"] not in set(after.images["sha256"])
    assert len(after.images) == len(before.images) - 1 == after.clip.shape[0] == after.dino.shape[0]
    removed = {(r["path"], r["reason"]): r for r in after.manifest["removed"]}
    assert set(removed) == {("coffee.png", "changed"), ("rocket.png", "deleted")}
    assert removed[("rocket.png", "deleted")]["sha256"] == old["rocket.png"]
    assert removed[("rocket.png", "deleted")]["image_id"] == old["rocket.png"][:16]
    assert removed[("coffee.png", "changed")]["sha256"] == old["coffee.png"]
    assert after.manifest["counts"]["files"] == 5
    # the index equals a fresh embed of the folder as it is now, row for row
    fresh = embed_collection(_embed_opts(photos, tmp_path / "fresh", tiny_models, name="c"))
    assert fresh.images == len(after.images)
    straight = open_index(tmp_path / "fresh", "c")
    by_sha = {s: k for k, s in enumerate(straight.images["sha256"])}
    order = [by_sha[s] for s in after.images["sha256"]]
    assert np.allclose(after.clip, straight.clip[order], atol=1e-5)
    assert np.allclose(after.dino, straight.dino[order], atol=1e-5)
    # nothing changed since: the rerun is a no-op; the deleted file coming back returns it, unembedded
    assert embed_collection(opts).embedded_now == 0
    assert open_index(tmp_path / "idx", "c").manifest["removed"] == after.manifest["removed"]
    (photos / "rocket.png").write_bytes(rocket)
    assert embed_collection(opts).embedded_now == 0
    back = open_index(tmp_path / "idx", "c")
    assert old["rocket.png"] in set(back.images["sha256"]) and len(back.images) == len(before.images)
    assert [r["path"] for r in back.manifest["removed"]] == ["coffee.png"]


def test_an_image_keeps_its_vectors_when_only_its_duplicate_copy_is_left(tmp_path, photos_dir, tiny_models):
    photos = _photos(tmp_path / "photos", photos_dir)
    opts = _embed_opts(photos, tmp_path / "idx", tiny_models, name="c")
    embed_collection(opts)
    before = open_index(tmp_path / "idx", "c").images.set_index("path")
    cat = before.loc["cat.png"]
    assert list(cat["duplicate_paths"]) == ["chelsea.png"]
    (photos / "cat.png").unlink()  # the copy that was embedded goes; chelsea.png holds the same bytes
    embed_collection(opts)
    after = open_index(tmp_path / "idx", "c")
    rows = after.images.set_index("path")
    assert rows.loc["chelsea.png", "image_id"] == cat["image_id"] and len(rows.loc["chelsea.png", "duplicate_paths"]) == 0
    k_new = list(after.images["path"]).index("chelsea.png")
    assert len(after.images) == len(before)
    assert after.manifest["removed"] == [{"path": "cat.png", "sha256": cat["sha256"], "image_id": cat["image_id"],
                                          "reason": "deleted"}]
    assert after.manifest["duplicates"] == []
    fresh = embed_collection(_embed_opts(photos, tmp_path / "fresh", tiny_models, name="c"))
    assert fresh.images == len(after.images)
    straight = open_index(tmp_path / "fresh", "c")
    k_straight = list(straight.images["path"]).index("chelsea.png")
    assert np.allclose(after.clip[k_new], straight.clip[k_straight], atol=1e-5)


def test_app_export_and_seed_find_moved_images_by_content(mined, tiny_models):
    tmp, photos, store = mined
    from vhmine.store import Image

    with store.session(write=False) as s:
        recorded = {img.id: (img.sha256, img.path) for img in s.query(Image)}
    assert len(recorded) == 3  # astronaut, cat (= chelsea), coffee
    cat_id = _sha(photos / "cat.png")[:16]
    astro_id = _sha(photos / "astronaut.png")[:16]
    assert recorded[cat_id][1].endswith("cat.png")
    # the embedded copy of the cat goes (chelsea.png is the same bytes); the astronaut moves
    (photos / "cat.png").unlink()
    assert C.image_bytes(store, cat_id) == (photos / "chelsea.png").read_bytes()  # through the index's duplicate list
    (photos / "sub").mkdir()
    os.rename(photos / "astronaut.png", photos / "sub" / "astronaut-moved.png")
    embed_collection(_embed_opts(photos, tmp / "idx", tiny_models, name="p"))  # the index follows the move
    for iid, (sha, _) in recorded.items():
        assert hashlib.sha256(C.image_bytes(store, iid)).hexdigest() == sha
    assert C.image_file(store, astro_id) == photos / "sub" / "astronaut-moved.png"
    # export writes the right pictures
    res = export_benchmark(store, ExportOptions(out=tmp / "bench", format="hf", kind="oeq"))
    assert sum(c["OEQ"] for c in res.counts.values()) > 0
    table = pd.read_parquet(tmp / "bench" / "data" / "oeq" / "test-00000-of-00001.parquet")
    for image_id, image in zip(table["image_id"], table["image"]):
        assert hashlib.sha256(image["bytes"]).hexdigest() == recorded[image_id][0]
    # seeding the run mined before the move again finds both images and records where they are now
    from vhmine.seed import seed_pairs

    seed_pairs(store, tmp / "runs" / "r" / "pairs.parquet", per_mode=3, modes=["counting"])
    with store.session(write=False) as s:
        assert s.get(Image, astro_id).path == str((photos / "sub" / "astronaut-moved.png").resolve())
        assert s.get(Image, cat_id).path == str((photos / "chelsea.png").resolve())
    # a file whose content changed (and no copy of the old content anywhere) is never served as that image
    coffee = photos / "coffee.png"
    coffee_id = _sha(coffee)[:16]
    PILImage.fromarray(np.full((30, 30, 3), 9, np.uint8)).save(coffee)
    embed_collection(_embed_opts(photos, tmp / "idx", tiny_models, name="p"))
    with pytest.raises(StoreError, match="no longer matches its recorded sha256: the file was changed; restore it"):
        C.image_bytes(store, coffee_id)
    with pytest.raises(ExportError, match="no longer matches its recorded sha256"):
        export_benchmark(store, ExportOptions(out=tmp / "bench2", format="hf", kind="oeq"))
    with pytest.raises(InputError, match=r"coffee\.png no longer holds image .*restore it, or run `vhmine embed`"):
        seed_pairs(store, tmp / "runs" / "r" / "pairs.parquet", per_mode=3, modes=["counting"])
    assert not (tmp / "bench2").exists()


# --- 3. what costs work is on disk before the rename that publishes it ----------------------------


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
    assert ("fsync", str(Path(final).parent)) in events[k + 1:], f"the folder of {final} was not fsynced after: {events}"
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
    photos = _photos(tmp_path / "photos", photos_dir)
    embed_collection(_embed_opts(photos, tmp_path / "idx", tiny_models, name="c"))
    for name in ("manifest.json", "images.parquet", "clip.faiss", "work/plan.parquet", "work/shards/part-00000.parquet"):
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


# --- 4. a failed embed leaves nothing that later commands trip over -------------------------------


def test_an_embed_whose_encoder_does_not_load_leaves_no_index_and_the_fixed_command_works(tmp_path, photos_dir, tiny_models):
    photos = _photos(tmp_path / "photos", photos_dir)
    idx = tmp_path / "idx"
    clip, dino = tiny_models

    def embed(clip_model):
        return CliRunner().invoke(app, ["embed", str(photos), "--name", "p", "--indexes", str(idx), "--clip-model",
                                        clip_model, "--dino-model", dino, "--workers", "0", "--shard-size", "2"])

    r = embed(f"local-dir:{tmp_path / 'no-such-model'}")
    assert r.exit_code == 2 and "no-such-model" in r.output, r.output
    assert not (idx / "p").exists()  # nothing half-written for `mine` or a listing to find
    r = CliRunner().invoke(app, ["mine", "--indexes", str(idx), "--out", str(tmp_path / "run")])
    assert r.exit_code == 2 and "no index under" in r.output and "vhmine embed" in r.output, r.output
    r = embed(clip)  # the corrected command
    assert r.exit_code == 0, r.output
    assert len(open_index(idx, "p").images) == 3
    r = CliRunner().invoke(app, ["mine", "--indexes", str(idx), "--out", str(tmp_path / "run"), "--clip", "-1",
                                 "--dino", "1"])
    assert r.exit_code == 0, r.output


def test_a_job_stopped_before_it_embedded_anything_starts_clean_and_is_never_picked(tmp_path, photos_dir, tiny_models):
    """A job killed while its models loaded leaves work/job.json (with the encoders asked for) and no shard."""
    from vhmine.config import default_index_name
    from vhmine.errors import EncoderError

    photos = _photos(tmp_path / "photos", photos_dir)
    idx = tmp_path / "idx"
    (idx / "p").mkdir(parents=True)  # the folder was there before (made by the killed job): it stays
    with pytest.raises(EncoderError):
        embed_collection(_embed_opts(photos, idx, (f"local-dir:{tmp_path / 'nope'}", tiny_models[1]), name="p"))
    assert (idx / "p" / "work" / "job.json").is_file()
    with pytest.raises(IndexMissingError, match=r"no finished index under .*: p did not finish embedding; rerun the same `vhmine embed`"):
        default_index_name(idx, None)
    embed_collection(_embed_opts(photos, tmp_path / "idx", tiny_models, name="good"))
    assert default_index_name(idx, None) == "good"  # the unfinished one is no candidate
    res = embed_collection(_embed_opts(photos, idx, tiny_models, name="p"))  # other encoders: starts clean
    assert res.images == 3
    job = json.loads((idx / "p" / "work" / "job.json").read_text())
    assert job["clip_model"] == tiny_models[0]
    with pytest.raises(IndexMissingError, match="2 indexes"):
        default_index_name(idx, None)
    # a folder of the user's own under the indexes is never taken for an index
    (idx / "notes").mkdir()
    (idx / "notes" / "todo.txt").write_text("x")
    with pytest.raises(InputError, match="is not an index that `vhmine embed` wrote"):
        embed_collection(_embed_opts(photos, idx, tiny_models, name="notes"))
    assert (idx / "notes" / "todo.txt").read_text() == "x"


def test_a_collection_moved_as_a_whole_is_found_at_its_new_place_after_a_rerun(tmp_path, photos_dir, tiny_models):
    old = _photos(tmp_path / "old", photos_dir)
    embed_collection(_embed_opts(old, tmp_path / "indexes", tiny_models, name="c"))
    before = open_index(tmp_path / "indexes", "c", load_vectors=False)
    new = tmp_path / "moved"
    old.rename(new)
    res = embed_collection(_embed_opts(new, tmp_path / "indexes", tiny_models, name="c"))
    assert res.embedded_now == 0  # same paths, same content: nothing is embedded again
    after = open_index(tmp_path / "indexes", "c", load_vectors=False)
    assert list(after.images["sha256"]) == list(before.images["sha256"])
    assert all(Path(p).is_file() and Path(p).is_relative_to(new) for p in after.abs_paths())
