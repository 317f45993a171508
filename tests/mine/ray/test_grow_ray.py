"""mine.grow and mine.across on `--engine ray` (a local 2-CPU cluster): a grown index's band of new rows and
the rectangle of two indexes give the local engine's run, pairs.csv byte for byte."""

import json

import numpy as np
import pandas as pd
import pytest
from helpers import make_index, unit_rows
from mine_runs import (
    A_KEYS,
    B_KEYS,
    CLIP,
    DINO,
    SHARED,
    brute,
    build,
    rectangle_brute,
    run_json,
    sorted_pairs,
    unordered_brute,
    vectors,
)

ray = pytest.importorskip("ray", reason="the Ray engine needs the ray extra: pip install -e '.[ray]'")

from vhmine import api  # noqa: E402
from vhmine.mine.ray.engine import tile_bytes  # noqa: E402

# every test here starts (or shares) the session's Ray cluster: the slow tier, so the inner loop starts none
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("ray_cluster")]
TILE = tile_bytes(64, 16, 12)  # tiles of 64 rows: a band of a few new rows still spans several column blocks


def mine(tmp_path, out="run", engine="ray", **kw):
    kw.setdefault("clip", CLIP)
    kw.setdefault("dino", DINO)
    extra = {"engine": "ray", "tile_memory": kw.pop("tile_memory", TILE)} if engine == "ray" else {}
    return api.mine(
        "col", indexes=tmp_path / "indexes", out=tmp_path / out, progress=False, gallery_size=0, **extra, **kw
    )


START = [k for k in range(260) if k % 5 != 4]  # 208 rows: 4 column blocks of 64


@pytest.mark.slow
@pytest.mark.parametrize("first", ["ray", "local"])
def test_a_grown_index_mines_only_the_band_of_its_new_rows_on_ray(tmp_path, first):
    build(tmp_path, START)
    mine(tmp_path, engine=first, max_per_image=2)
    before = run_json(tmp_path)
    now = [k for k in START if k not in (0, 1, 77)] + [4, 9, 99, 300, 301]
    now[10] = 900 + now[10] % 5  # a changed file
    build(tmp_path, now)
    res = mine(tmp_path, max_per_image=2)
    meta = run_json(tmp_path)
    inc = meta["incremental"]
    assert (inc["from"], inc["old_rows"], inc["new_rows"], inc["removed_rows"]) == (before["run_id"], 204, 6, 4)
    assert meta["ray"]["shape"] == "band" and meta["ray"]["tiles"] == 1 * 4  # one chunk of new rows x 4 blocks
    assert "mined 6 new rows against 204" in res.summary()
    mine(tmp_path, out="full", engine="local", full=True, max_per_image=2)
    assert (tmp_path / "run" / "pairs.csv").read_bytes() == (tmp_path / "full" / "pairs.csv").read_bytes()
    assert meta["counts"] == run_json(tmp_path, "full")["counts"]
    # and the run it wrote is reused in turn, by either engine
    build(tmp_path, now + [14])
    mine(tmp_path, engine="local" if first == "ray" else "ray", max_per_image=2)
    assert run_json(tmp_path)["incremental"]["from"] == meta["run_id"]
    mine(tmp_path, out="full", engine="local", full=True, max_per_image=2)
    pd.testing.assert_frame_equal(sorted_pairs(tmp_path / "run"), sorted_pairs(tmp_path / "full"))
    assert not (tmp_path / ".run.job").exists()


def test_ray_uncapped_growth_equals_a_brute_force(tmp_path):
    build(tmp_path, START[:100])
    mine(tmp_path)
    now = START[:100] + [4, 9, 14, 400]
    build(tmp_path, now)
    mine(tmp_path)
    df = sorted_pairs(tmp_path / "run")
    assert list(zip(df.image_id_a, df.image_id_b, df.clip_sim, df.dino_sim)) == brute(now)


def test_ray_notices_kept_rows_with_other_vectors_after_its_scan_and_mines_in_full(tmp_path, caplog):
    build(tmp_path, START[:100])
    mine(tmp_path)
    keys = START[:100] + [4]
    clip, dino = vectors(keys)
    clip[3] = unit_rows(clip[3:4] + 0.01)[0]
    make_index(
        tmp_path / "indexes", "col", clip, dino, root=tmp_path / "images", keys=keys, created="2026-11-01T00:00:00+0000"
    )
    with caplog.at_level("WARNING", logger="vhmine"):
        mine(tmp_path)
    meta = run_json(tmp_path)
    assert "incremental" not in meta and meta["ray"]["shape"] == "triangle"
    assert any("1 row(s) of index 'col' have other vectors" in r.getMessage() for r in caplog.records)


def test_against_on_ray_is_the_local_engines_rectangle(tmp_path):
    from mine_runs import build_named

    build_named(tmp_path, "mine", A_KEYS * 1)
    build_named(tmp_path, "ref", B_KEYS)
    kw = dict(against="ref", indexes=tmp_path / "indexes", clip=CLIP, dino=DINO, progress=False, gallery_size=3)
    api.mine("mine", out=tmp_path / "local", **kw)
    res = api.mine("mine", out=tmp_path / "ray", engine="ray", tile_memory=tile_bytes(64, 16, 12), **kw)
    assert (tmp_path / "ray" / "pairs.csv").read_bytes() == (tmp_path / "local" / "pairs.csv").read_bytes()
    df = pd.read_parquet(tmp_path / "ray" / "pairs.parquet")
    assert sorted(zip(df.image_id_a, df.image_id_b, df.clip_sim, df.dino_sim)) == rectangle_brute(A_KEYS, B_KEYS)
    meta = json.loads((tmp_path / "ray" / "run.json").read_text())
    assert meta["ray"]["shape"] == "rectangle" and meta["against"]["index"] == "ref"
    assert res.written == len(df) > 10 and set(df.index_b) == {"ref"}
    assert np.all(df.path_b.str.startswith(str(tmp_path / "images-ref")))


@pytest.mark.parametrize("caps", [{}, {"max_per_image": 2, "max_pairs": 30}, {"max_pairs": 25}])
def test_against_on_ray_with_shared_images_is_the_local_engines_rectangle(tmp_path, caps):
    """Images in both indexes: no pair of an image with itself, each unordered pair once, pairs.csv equal to
    the local engine's (the rule applied before the ranking and the caps), the shared images said."""
    from mine_runs import build_named

    a_keys, b_keys = A_KEYS + [k for k in SHARED if k not in A_KEYS], B_KEYS + [k for k in SHARED if k not in B_KEYS]
    build_named(tmp_path, "mine", a_keys)
    build_named(tmp_path, "ref", b_keys)
    kw = dict(against="ref", indexes=tmp_path / "indexes", clip=CLIP, dino=1.0, progress=False, gallery_size=0)
    local = api.mine("mine", out=tmp_path / "local", **kw, **caps)
    res = api.mine("mine", out=tmp_path / "ray", engine="ray", tile_memory=tile_bytes(64, 16, 12), **kw, **caps)
    assert (tmp_path / "ray" / "pairs.csv").read_bytes() == (tmp_path / "local" / "pairs.csv").read_bytes()
    df = pd.read_parquet(tmp_path / "ray" / "pairs.parquet")
    assert not (df.image_id_a == df.image_id_b).any()
    key = [tuple(sorted(p)) for p in zip(df.image_id_a, df.image_id_b)]
    assert len(set(key)) == len(key)
    if not caps:
        assert dict(zip(key, zip(df.clip_sim, df.dino_sim))) == unordered_brute(a_keys, b_keys, CLIP, 1.0)
    meta, meta_local = (json.loads((tmp_path / d / "run.json").read_text()) for d in ("ray", "local"))
    assert meta["counts"] == meta_local["counts"] and meta["counts"]["shared_images"] == 10
    assert "10 image(s) are in both indexes" in res.summary()
    assert (res.written, res.clip_alike, res.in_box) == (local.written, local.clip_alike, local.in_box)


def test_a_stopped_band_job_resumes_from_its_finished_tiles(tmp_path, monkeypatch):
    from vhmine.errors import Interrupted
    from vhmine.mine.ray.tilejob import TileJob

    build(tmp_path, START)
    mine(tmp_path)
    now = START + [k for k in range(300, 460)]  # 160 new rows: 3 chunks x 6 column blocks
    build(tmp_path, now)
    record, seen = TileJob.record, []

    def stop_after_four(self, k, rows, info):
        if len(seen) == 4:
            raise KeyboardInterrupt
        seen.append(k)
        return record(self, k, rows, info)

    monkeypatch.setattr(TileJob, "record", stop_after_four)
    with pytest.raises(Interrupted, match="resume"):
        mine(tmp_path)
    monkeypatch.setattr(TileJob, "record", record)
    assert (tmp_path / ".run.job").is_dir() and "incremental" not in run_json(tmp_path)
    res = mine(tmp_path)
    meta = run_json(tmp_path)
    assert meta["ray"]["shape"] == "band" and meta["ray"]["tiles"] == 18
    assert meta["ray"]["tiles_done_before"] == 4 and "resumed: 4 of 18 tiles" in res.summary()
    mine(tmp_path, out="full", engine="local", full=True)
    assert (tmp_path / "run" / "pairs.csv").read_bytes() == (tmp_path / "full" / "pairs.csv").read_bytes()


def test_a_run_of_some_tiles_only_is_never_reused(tmp_path, caplog):
    build(tmp_path, START)
    mine(tmp_path, tiles=[0, 1])  # a sizing run: 2 of the triangle's 10 tiles
    assert run_json(tmp_path)["ray"]["tiles_mined"] == 2
    build(tmp_path, START + [4])
    with caplog.at_level("WARNING", logger="vhmine"):
        mine(tmp_path)
    meta = run_json(tmp_path)
    assert "incremental" not in meta and meta["ray"]["shape"] == "triangle" and meta["ray"]["tiles_mined"] == 10
    assert any("mined only 2 of its 10 tiles (--tiles): mining in full" in r.getMessage() for r in caplog.records)
    mine(tmp_path, out="full", engine="local", full=True)
    assert (tmp_path / "run" / "pairs.csv").read_bytes() == (tmp_path / "full" / "pairs.csv").read_bytes()


def test_a_ray_runs_rows_parquet_is_streamed_row_group_by_row_group(tmp_path, monkeypatch):
    """The driver writes rows.parquet a row group at a time (tiny groups forced here: several), reading
    images.parquet by batch and the digests by scanned chunk, never every id at once: the same file, byte for
    byte, as the local engine's from its whole arrays; with pyarrow's default groups, the file the code before
    streaming wrote (test_state), and the same pairs."""
    import pyarrow.parquet as pq

    from vhmine.index import rows as index_rows
    from vhmine.mine import state

    build(tmp_path, START)
    mine(tmp_path, out="before", engine="local")
    monkeypatch.setattr(state, "ROW_GROUP", 64, raising=False)
    spans = []
    read_ids = index_rows.read_ids
    monkeypatch.setattr(index_rows, "read_ids", lambda loc, a, b, *r: spans.append(b - a) or read_ids(loc, a, b, *r))
    mine(tmp_path, out="ray")
    mine(tmp_path, out="local", engine="local")
    assert max(spans, default=0) < len(START)  # (the driver read all 208 ids at once)
    meta = pq.ParquetFile(tmp_path / "ray" / "rows.parquet").metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [64, 64, 64, 16]
    for f in ("rows.parquet", "pairs.csv"):  # (alike.parquet: a group per tile on Ray, in another order)
        assert (tmp_path / "ray" / f).read_bytes() == (tmp_path / "local" / f).read_bytes(), f
    monkeypatch.undo()
    mine(tmp_path, out="ray", full=True)
    for f in ("rows.parquet", "pairs.csv"):
        assert (tmp_path / "ray" / f).read_bytes() == (tmp_path / "before" / f).read_bytes(), f


@pytest.mark.parametrize("side", ["a", "b"])
def test_against_on_ray_with_an_index_of_one_image_is_the_local_engines_1_x_n_rectangle(tmp_path, side):
    from mine_runs import build_named

    one, many = [3], [k for k in range(40) if k != 3]
    build_named(tmp_path, "mine", one if side == "a" else many)
    build_named(tmp_path, "ref", many if side == "a" else one)
    kw = dict(against="ref", indexes=tmp_path / "indexes", clip=CLIP, dino=DINO, progress=False, gallery_size=0)
    api.mine("mine", out=tmp_path / "local", **kw)
    res = api.mine("mine", out=tmp_path / "ray", engine="ray", tile_memory=tile_bytes(64, 16, 12), **kw)
    assert (tmp_path / "ray" / "pairs.csv").read_bytes() == (tmp_path / "local" / "pairs.csv").read_bytes()
    want = rectangle_brute(*((one, many) if side == "a" else (many, one)))
    df = pd.read_parquet(tmp_path / "ray" / "pairs.parquet")
    assert want and res.written == len(want)
    assert sorted(zip(df.image_id_a, df.image_id_b, df.clip_sim, df.dino_sim)) == want


def _no_side_whole(monkeypatch):
    """The driver may not read a side of a join whole: rows.parquet and alike.parquet only through the streamed
    join, the index's ids only a few rows at a time (tile tasks run in Ray's workers, not patched here)."""
    from vhmine.index.rows import IndexRows
    from vhmine.mine import state

    def whole(*a, **k):
        raise AssertionError("the driver read a side of the join whole")

    read_ids = IndexRows.ids

    def few(self, start, stop):
        assert stop - start <= 64, f"the driver read the ids of rows [{start}, {stop})"
        return read_ids(self, start, stop)

    monkeypatch.setattr(state, "read_rows", whole)
    monkeypatch.setattr(state, "read_alike", whole)
    monkeypatch.setattr(IndexRows, "ids", few)


def test_a_band_joined_in_many_buckets_holds_no_side_and_is_the_local_engines_run(tmp_path, monkeypatch):
    from vhmine.mine import idjoin

    caps = {"max_per_image": 2, "max_pairs": 40}
    build(tmp_path, START)
    mine(tmp_path, **caps)
    now = [k for k in START if k not in (0, 1, 77)] + [4, 9, 99, 300, 301]
    now[10] = 900 + now[10] % 5
    build(tmp_path, now)
    with monkeypatch.context() as m:
        m.setattr(idjoin, "BUCKET_ROWS", 16)  # 14 buckets of each side
        _no_side_whole(m)
        res = mine(tmp_path, **caps)
    meta = run_json(tmp_path)
    inc = meta["incremental"]
    assert (inc["old_rows"], inc["new_rows"], inc["removed_rows"]) == (204, 6, 4)
    assert inc["join"]["buckets"] == 14 and inc["join"]["scratch_peak_bytes"] > 208 * 16
    assert "mined 6 new rows against 204" in res.summary()
    assert not list(tmp_path.glob(".*.ids")) and not list(tmp_path.glob(".run.job*"))
    full = mine(tmp_path, out="full", engine="local", full=True, **caps)
    assert (tmp_path / "run" / "pairs.csv").read_bytes() == (tmp_path / "full" / "pairs.csv").read_bytes()
    assert meta["counts"] == run_json(tmp_path, "full")["counts"]
    assert res.cuts == full.cuts and res.cuts  # (the caps' cut line: both caps left pairs out)


def test_against_with_shared_images_joined_in_many_buckets_is_the_local_engines_rectangle(tmp_path, monkeypatch):
    from mine_runs import build_named

    from vhmine.mine import idjoin

    a_keys, b_keys = A_KEYS + [k for k in SHARED if k not in A_KEYS], B_KEYS + [k for k in SHARED if k not in B_KEYS]
    build_named(tmp_path, "mine", a_keys)
    build_named(tmp_path, "ref", b_keys)
    kw = dict(against="ref", indexes=tmp_path / "indexes", clip=CLIP, dino=1.0, progress=False, gallery_size=0)
    local = api.mine("mine", out=tmp_path / "local", max_per_image=2, **kw)
    with monkeypatch.context() as m:
        m.setattr(idjoin, "BUCKET_ROWS", 8)
        _no_side_whole(m)
        res = api.mine("mine", out=tmp_path / "ray", engine="ray", tile_memory=TILE, max_per_image=2, **kw)
    assert (tmp_path / "ray" / "pairs.csv").read_bytes() == (tmp_path / "local" / "pairs.csv").read_bytes()
    meta, meta_local = (json.loads((tmp_path / d / "run.json").read_text()) for d in ("ray", "local"))
    assert meta["counts"] == meta_local["counts"] and meta["counts"]["shared_images"] == 10
    assert (res.written, res.clip_alike, res.in_box) == (local.written, local.clip_alike, local.in_box)


def test_a_ray_run_reads_the_kept_digests_and_keeps_them_for_either_engine(tmp_path, caplog):
    """The scan hashes only the rows of chunks (vhmine.index.CHUNK_ROWS) the index's kept file does not vouch
    for, writes the file when it hashed any (what the local engine reads too), and still catches a changed bit
    of an old row whose chunk the file vouched for."""
    from mine_runs import vectors

    from vhmine.index import ROW_DIGESTS, chunk_checks, row_digests
    from vhmine.index.rows import open_vectors

    def kept():
        with np.load(tmp_path / "indexes" / "col" / ROW_DIGESTS) as z:
            return z["digests"], z["checks"]

    keys = list(range(4200))  # a whole kept chunk of 4,096 rows and part of another
    build(tmp_path, keys)
    mine(tmp_path, tile_memory=None)
    assert run_json(tmp_path)["ray"]["digests"] == {"rows_digested": 4200, "rows_stored": 0}
    clip, dino = vectors(keys)
    np.testing.assert_array_equal(kept()[0], row_digests(clip, dino))
    np.testing.assert_array_equal(kept()[1], chunk_checks(clip, dino, 4096))
    grown = keys + [5000, 5001, 5002]  # appended, as `vhmine embed` appends a grown collection's new files
    build(tmp_path, grown)
    res = mine(tmp_path, tile_memory=None)
    meta = run_json(tmp_path)
    assert meta["ray"]["digests"] == {"rows_digested": 4203 - 4096, "rows_stored": 4096}
    assert meta["incremental"]["new_rows"] == 3 and "mined 3 new rows against 4,200" in res.summary()
    np.testing.assert_array_equal(kept()[0], row_digests(*vectors(grown)))
    # then a bit of an old row changed in place (its file's size kept): its chunk no longer checks, and the
    # growth falls back to a full mine
    build(tmp_path, grown + [5003])
    path = tmp_path / "indexes" / "col" / "clip.faiss"
    vf = open_vectors(path)
    with open(path, "r+b") as f:
        f.seek(vf.offset + 17 * vf.row_bytes + 5)
        byte = f.read(1)[0] ^ 0x01
        f.seek(-1, 1)
        f.write(bytes([byte]))
    with caplog.at_level("WARNING", logger="vhmine"):
        mine(tmp_path, tile_memory=None)
    assert any("1 row(s) of index 'col' have other vectors" in r.getMessage() for r in caplog.records)
    meta = run_json(tmp_path)
    assert meta["ray"]["shape"] == "triangle" and "incremental" not in meta
    now = [open_vectors(tmp_path / "indexes" / "col" / f"{k}.faiss") for k in ("clip", "dino")]
    np.testing.assert_array_equal(kept()[0], row_digests(*(v.read(0, v.rows) for v in now)))
