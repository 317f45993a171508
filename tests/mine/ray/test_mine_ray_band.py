"""vhmine.mine.ray.engine over tileshapes.Band (the pairs touching new rows of a grown index) and
tileshapes.Rectangle (the pairs across two indexes), on a local 2-CPU Ray cluster: exact (float64 brute
force, the same sim bits), the old rows' triangle plus the band is the full triangle, ranked tiles
oriented as stated and keeping every CLIP-alike pair when asked, row digests recorded in the job folder,
and a stopped job resumed from its finished tiles (and scanned chunks)."""

import json

import numpy as np
import pytest
from helpers import unit_rows
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mine_sets import clustered

ray = pytest.importorskip("ray", reason="the Ray engine needs the ray extra: pip install -e '.[ray]'")

from vhmine.errors import VhmineError  # noqa: E402
from vhmine.index import row_digests  # noqa: E402
from vhmine.mine.join.simsearch import PairSet, assert_same_pairs, brute_force_pairs  # noqa: E402
from vhmine.mine.ray.arrays import find_pairs_across_ray, find_pairs_ray  # noqa: E402
from vhmine.mine.ray.engine import run_job  # noqa: E402
from vhmine.mine.ray.tilejob import SCAN, Band, Rectangle, TileJob, Triangle  # noqa: E402

# every test here starts (or shares) the session's Ray cluster: the slow tier, so the inner loop starts none
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300), pytest.mark.usefixtures("ray_cluster")]


def tied(n, seed, d=16, e=8):
    """Random rows in clusters (CLIP cosines up to about 0.99), with exact copies of some rows (CLIP and
    DINOv2 both): pairs whose sims tie exactly, so a threshold set to one of them decides ties."""
    rng = np.random.default_rng(seed)
    clip, dino = rng.standard_normal((n, d)), rng.standard_normal((n, e))
    for s in range(0, n, 9):  # clusters of 9
        clip[s : s + 9] = rng.standard_normal(d) + rng.uniform(0.1, 0.6) * rng.standard_normal(
            (len(clip[s : s + 9]), d)
        )
    clip, dino = unit_rows(clip), unit_rows(dino)
    for src in range(0, n - 1, 7):
        dst = int(rng.integers(0, n))
        clip[dst], dino[dst] = clip[src], dino[src]
    return clip, dino


def thresholds(clip, dino, pick):
    """clip_min and dino_max equal to sims of real pairs (pick in [0, 1): which), so that pairs sit on them."""
    ref = brute_force_pairs(clip, dino, 0.5)
    if not len(ref):
        return 0.5, 0.5
    k = int(pick * len(ref))
    return float(ref.clip_sim[k]), float(np.sort(ref.dino_sim)[len(ref) // 2])


def subset(ps: PairSet, keep) -> PairSet:
    return PairSet(ps.i[keep], ps.j[keep], ps.clip_sim[keep], ps.dino_sim[keep])


def band_reference(clip, dino, clip_min, dino_max, new):
    full = brute_force_pairs(clip, dino, clip_min, dino_max)
    return subset(full, np.isin(full.i, new) | np.isin(full.j, new))


def across_reference(clip_a, dino_a, clip_b, dino_b, clip_min, dino_max):
    """brute force of the stacked rows [A; B], the pairs i < nA <= j, with j shifted back to B's rows."""
    na = len(clip_a)
    both = brute_force_pairs(np.concatenate([clip_a, clip_b]), np.concatenate([dino_a, dino_b]), clip_min, dino_max)
    k = (both.i < na) & (both.j >= na)
    return PairSet(both.i[k], both.j[k] - na, both.clip_sim[k], both.dino_sim[k])


def assert_across_equal(got: PairSet, want: PairSet, na: int):
    """assert_same_pairs (which wants i < j) on pairs with B's rows shifted past A's, and (i, j) order."""
    shift = lambda p: PairSet(p.i, p.j + na, p.clip_sim, p.dino_sim)  # noqa: E731
    assert_same_pairs(shift(got), shift(want), atol=0)
    assert np.array_equal(got.i, want.i) and np.array_equal(got.j, want.j)


def news(n):
    """New rows: one row, every row, or a scattered subset (with runs) of a grown index."""
    return st.one_of(
        st.integers(0, n - 1).map(lambda r: [r]),
        st.just(list(range(n))),
        st.lists(st.integers(0, n - 1), min_size=1, max_size=n).map(sorted),
        st.integers(0, n - 1).map(lambda r: list(range(r, n))),  # the rows appended at the end
    )


@st.composite
def bands(draw):
    n = draw(st.integers(2, 220))
    return n, draw(st.integers(0, 2**16)), draw(news(n)), draw(st.floats(0, 0.99))


@settings(max_examples=8)  # each example is a job on the cluster: seconds
@given(bands())
@example((130, 1, [129], 0.3))  # one row, the last, alone in its chunk and its 3rd column block
def test_property_band_is_brute_force_on_the_pairs_touching_new_rows(case):
    n, seed, new, pick = case
    clip, dino = tied(n, seed)
    clip_min, dino_max = thresholds(clip, dino, pick)
    got = find_pairs_ray(clip, dino, clip_min, dino_max, new_rows=new, tile=64)
    want = band_reference(clip, dino, clip_min, dino_max, new)
    assert_same_pairs(got, want, atol=0)  # the same pairs, the same sim bits
    assert np.array_equal(got.i, want.i) and np.array_equal(got.j, want.j)  # sorted by (i, j)


@settings(max_examples=8)
@given(st.integers(1, 200), st.integers(1, 200), st.integers(0, 2**16), st.floats(0, 0.99))
@example(1, 150, 3, 0.5)  # one side of one row
@example(150, 1, 4, 0.5)
def test_property_rectangle_is_brute_force_of_the_stacked_rows_across(na, nb, seed, pick):
    clip, dino = tied(na + nb, seed)
    clip_min, dino_max = thresholds(clip, dino, pick)
    ca, da, cb, db = clip[:na], dino[:na], clip[na:], dino[na:]
    got = find_pairs_across_ray(ca, da, cb, db, clip_min, dino_max, tile=64)
    assert_across_equal(got, across_reference(ca, da, cb, db, clip_min, dino_max), na)


def test_across_a_spiky_rectangle_shares_one_turned_quantiser_and_is_exact():
    clip, dino = clustered(450, 32, 16, 21, spiky=True)
    stats = {}
    got = find_pairs_across_ray(clip[:190], dino[:190], clip[190:], dino[190:], 0.9, 0.6, tile=64, stats=stats)
    want = across_reference(clip[:190], dino[:190], clip[190:], dino[190:], 0.9, 0.6)
    assert len(want) > 30 and stats["rotated"] and stats["blocks"] == 3 * 5
    assert_across_equal(got, want, 190)
    with pytest.raises(VhmineError, match="clip vectors of A have 32 dims, of B 16"):
        find_pairs_across_ray(clip, dino, clip[:, :16].copy(), dino, 0.9)


def test_the_old_rows_triangle_and_the_band_are_the_full_triangle_exactly():
    clip, dino = tied(400, 5)
    rng = np.random.default_rng(5)
    new = np.union1d(rng.choice(330, 37, replace=False), np.arange(330, 400))  # scattered changes + appended
    old = np.setdiff1d(np.arange(400), new)
    tri = find_pairs_ray(clip[old], dino[old], 0.8, 0.6, tile=64)
    band = find_pairs_ray(clip, dino, 0.8, 0.6, new_rows=new, tile=64)
    i, j = np.concatenate([old[tri.i], band.i]), np.concatenate([old[tri.j], band.j])
    order = np.lexsort((j, i))
    full = find_pairs_ray(clip, dino, 0.8, 0.6, tile=64)
    assert len(full) > 100 and len(band) > 20 and len(tri) > 20
    assert np.array_equal(i[order], full.i) and np.array_equal(j[order], full.j)
    for name in ("clip_sim", "dino_sim"):  # bit for bit
        both = np.concatenate([getattr(tri, name), getattr(band, name)])[order]
        assert np.array_equal(both, getattr(full, name))
    assert_same_pairs(full, brute_force_pairs(clip, dino, 0.8, 0.6), atol=0)


# --- ranked tiles from an index: what runs write ---------------------------------------------------------


def id_index(folder, clip, dino, prefix=""):
    """An index (vhmine.index's files) whose image ids are `prefix` + the row's hex number reversed (their
    order differs from row order); returns its IndexRows and ids."""
    import pandas as pd

    from vhmine.index import index_rows, write_index

    n = len(clip)
    ids = [prefix + f"{k:08x}"[::-1] for k in range(n)]
    images = pd.DataFrame(
        {"image_id": ids, "path": [f"img{k}.png" for k in range(n)], "sha256": [f"{k:064x}" for k in range(n)]}
    )
    write_index(
        folder,
        images,
        clip,
        dino,
        skipped=pd.DataFrame({"path": [], "reason": []}),
        manifest={
            "name": folder.name,
            "root": str(folder),
            "encoders": {"clip": {"spec": "c", "dim": clip.shape[1]}, "dino": {"spec": "d", "dim": dino.shape[1]}},
        },
    )
    return index_rows(folder), np.array(ids, dtype="S")


def tile_rows_of(job):
    """Every tile's rows (in-box then the others), and the in-box ones, over the finished tiles."""
    parts = [(job.rows(k)[:], job.done[k]) for k in sorted(job.done)]
    every = np.concatenate([p for p, _ in parts])
    inbox = np.concatenate([p[: e["kept"]] for p, e in parts])
    for p, e in parts:
        assert len(p) == e["kept"] + e["sample"]
    return every, inbox


def assert_merges_in_rank_order(job, inbox, scratch):
    """mine.merge over the job's tiles: their in-box pairs (not the CLIP-alike ones after them), in rank order."""
    from vhmine.mine.ray.merge import ranked
    from vhmine.mine.ray.tilejob import rank_order

    merged = np.concatenate(list(ranked(job, job.done, scratch, chunk=16)))
    assert np.array_equal(merged, inbox[rank_order(inbox)])


def keys(i, j):
    return set(zip(np.asarray(i).tolist(), np.asarray(j).tolist()))


def test_ranked_band_tiles_are_oriented_by_id_keep_every_alike_pair_and_record_digests(tmp_path):
    clip, dino = tied(300, 8)
    rows, ids = id_index(tmp_path / "idx", clip, dino)
    new = np.array([0, 5, 63, 64, 65, 130, *range(280, 300)])
    shape = Band(300, 64, new)
    job = TileJob(tmp_path / "job", {"shape": shape.record()}).open()
    info = run_job(
        ray, rows, job, side=64, clip_min=0.8, dino_max=0.5, ranked=True, shape=shape, keep_alike=True, digests=True
    )
    assert info["tiles"] == len(shape) == 5 * 1 and info["shape"]["kind"] == "band"
    every, inbox = tile_rows_of(job)
    alike = band_reference(clip, dino, 0.8, np.inf, new)  # every CLIP-alike pair touching a new row
    assert len(alike) > 60 and (alike.dino_sim > 0.5).sum() >= 10
    assert keys(every["lo"], every["hi"]) == keys(alike.i, alike.j) and len(every) == len(alike)  # each once
    assert keys(inbox["lo"], inbox["hi"]) == keys(alike.i[alike.dino_sim <= 0.5], alike.j[alike.dino_sim <= 0.5])
    assert info["in_box"] == len(inbox) and info["clip_alike"] == len(every)
    assert np.all(every["lo"] < every["hi"]) and np.all(every["id_a"] < every["id_b"])
    assert np.array_equal(np.minimum(every["a"], every["b"]), every["lo"])
    assert np.array_equal(ids[every["a"]], every["id_a"]) and np.array_equal(ids[every["b"]], every["id_b"])
    assert_merges_in_rank_order(job, inbox, tmp_path / "merge")
    assert np.array_equal(job.digests("a", 300), row_digests(clip, dino))
    # keep_alike keeps every other CLIP-alike pair, where a scatter's sample keeps a few, and the in-box
    # pairs cut by a tile's top list (here, in this process: the tile task's function itself)
    from vhmine.mine.join.blocks import Quantiser
    from vhmine.mine.ray.tilejob import ranked_dtype
    from vhmine.mine.ray.tiletask import mine_tile

    k = max(job.done, key=lambda t: job.done[t]["sample"])
    qz = Quantiser.from_dict(job.job["quantiser"])
    kw = dict(max_candidates=10**6, ranked=True, dtype=ranked_dtype(rows.id_width), sample=1)
    sampled, s_info = mine_tile(rows, qz, shape.tile(k), 64, 0.8, 0.5, **kw)
    alike, a_info = mine_tile(rows, qz, shape.tile(k), 64, 0.8, 0.5, keep_alike=True, top=2, **kw)
    assert s_info["sample"] == 1 < job.done[k]["sample"] and a_info["kept"] == 2 < job.done[k]["kept"]
    assert len(alike) == a_info["clip_alike"] == job.done[k]["clip_alike"] == len(job.rows(k))
    assert a_info["sample"] == len(alike) - 2 and np.array_equal(
        np.sort(alike, order=["lo", "hi"]), np.sort(job.rows(k)[:], order=["lo", "hi"])
    )
    # a lost digests file: only its chunk is scanned again (the quantiser is kept), and nothing is mined (with
    # digests the scan's chunks are whole chunks of the index's kept digests, vhmine.index.CHUNK_ROWS: here one)
    lines = len((tmp_path / "job" / SCAN).read_text().splitlines())
    assert lines == 1 and sorted(job.chunks) == [("a", 0)]
    job.close()
    (tmp_path / "job" / job.chunks[("a", 0)]["file"]).unlink()
    job = TileJob(tmp_path / "job", {"shape": shape.record()}).open()
    again = run_job(
        ray, rows, job, side=64, clip_min=0.8, dino_max=0.5, ranked=True, shape=shape, keep_alike=True, digests=True
    )
    assert again["tiles_done_before"] == 5 and again["quantiser"] == info["quantiser"]
    assert len((tmp_path / "job" / SCAN).read_text().splitlines()) == lines + 1
    assert np.array_equal(job.digests("a", 300), row_digests(clip, dino))
    job.close()
    # a scan (chunks of the tile side without digests) stopped after two chunks, no quantiser recorded yet:
    # resumed, it scans the other three only
    job = TileJob(tmp_path / "job2", {"shape": shape.record()}).open()
    plain = run_job(ray, rows, job, side=64, clip_min=0.8, dino_max=0.5, ranked=True, shape=shape)
    assert plain["quantiser"] == info["quantiser"]
    job.close()
    scan = tmp_path / "job2" / SCAN
    assert len(scan.read_text().splitlines()) == 5
    scan.write_text(
        "".join(f"{line}\n" for line in scan.read_text().splitlines() if json.loads(line)["start"] in (0, 64))
    )
    record = json.loads((tmp_path / "job2" / "job.json").read_text())
    del record["quantiser"]
    (tmp_path / "job2" / "job.json").write_text(json.dumps(record))
    job = TileJob(tmp_path / "job2", {"shape": shape.record()}).open()
    assert sorted(job.chunks) == [("a", 0), ("a", 64)] and "quantiser" not in job.job
    resumed = run_job(ray, rows, job, side=64, clip_min=0.8, dino_max=0.5, ranked=True, shape=shape)
    assert resumed["quantiser"] == info["quantiser"] and len(scan.read_text().splitlines()) == 5
    job.close()


def test_ranked_rectangle_tiles_keep_a_of_the_first_index_and_b_of_the_second(tmp_path):
    clip, dino = tied(330, 9)
    na = 140
    rows_a, ids_a = id_index(tmp_path / "a", clip[:na], dino[:na])
    rows_b, ids_b = id_index(tmp_path / "b", clip[na:], dino[na:], prefix="8")  # ids above and below A's
    shape = Rectangle(na, 330 - na, 64)
    job = TileJob(tmp_path / "job", {"shape": shape.record()}).open()
    info = run_job(
        ray,
        rows_a,
        job,
        side=64,
        clip_min=0.8,
        dino_max=0.5,
        ranked=True,
        shape=shape,
        rows_b=rows_b,
        keep_alike=True,
        digests=True,
    )
    assert info["tiles"] == 3 * 3
    every, inbox = tile_rows_of(job)
    alike = across_reference(clip[:na], dino[:na], clip[na:], dino[na:], 0.8, np.inf)
    assert len(alike) > 30
    assert keys(every["a"], every["b"]) == keys(alike.i, alike.j) and len(every) == len(alike)
    assert keys(inbox["a"], inbox["b"]) == keys(alike.i[alike.dino_sim <= 0.5], alike.j[alike.dino_sim <= 0.5])
    assert np.array_equal(every["lo"], every["a"]) and np.array_equal(every["hi"], every["b"])
    assert np.array_equal(ids_a[every["a"]], every["id_a"]) and np.array_equal(ids_b[every["b"]], every["id_b"])
    assert (every["id_a"] > every["id_b"]).any() and (every["id_a"] < every["id_b"]).any()  # never swapped
    assert_merges_in_rank_order(job, inbox, tmp_path / "merge")
    assert np.array_equal(job.digests("a", na), row_digests(clip[:na], dino[:na]))
    assert np.array_equal(job.digests("b", 330 - na), row_digests(clip[na:], dino[na:]))
    job.close()


def test_a_job_folder_made_for_another_shape_or_other_new_rows_starts_over(tmp_path, caplog):
    from mine_sets import rows

    shapes = [
        Triangle(300, 64),
        Band(300, 64, [3, 4]),
        Band(300, 64, [3, 5]),
        Band(300, 128, [3, 4]),
        Rectangle(300, 10, 64),
        Rectangle(290, 20, 64),
    ]
    records = [s.record() for s in shapes]
    assert all(json.dumps(a) != json.dumps(b) for k, a in enumerate(records) for b in records[k + 1 :])
    for prev, now in zip(records, records[1:]):
        job = TileJob(tmp_path / "job", {"clip": 0.9, "shape": prev}).open()
        job.record(0, rows(0), {})
        job.record_chunk("a", 0, 64, {"amax": 0.5, "levels": 127}, np.arange(64, dtype=np.uint64))
        job.close()
        other = TileJob(tmp_path / "job", {"clip": 0.9, "shape": now}).open()
        assert other.done == {} and other.chunks == {} and not (tmp_path / "job" / "digests").exists()
        other.close()
    assert "(shape differ): starting the job over" in caplog.text
    job = TileJob(tmp_path / "job2", {"shape": records[1]}).open()
    with pytest.raises(ValueError, match="the job's identity names shape"):
        run_job(ray, None, job, side=64, clip_min=0.9, dino_max=0.5, ranked=False, shape=shapes[2])
    job.close()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["band", "rectangle"])
def test_a_job_stopped_by_a_killed_task_resumes_and_mines_only_the_missing_tiles(tmp_path, kind):
    from vhmine.index.rows import IndexRows, open_vectors

    clip, dino = tied(260, 11)
    views = []
    for s, part in enumerate((slice(0, 260), slice(0, 120), slice(120, 260))):
        for name, x in (("clip", clip[part]), ("dino", dino[part])):
            np.save(tmp_path / f"{name}{s}.npy", x)
        views.append(IndexRows(open_vectors(tmp_path / f"clip{s}.npy"), open_vectors(tmp_path / f"dino{s}.npy")))
    new = np.array([2, 70, 71, 72, *range(200, 260)])
    if kind == "band":
        shape, rows, rows_b = Band(260, 64, new), views[0], None
        want = band_reference(clip, dino, 0.8, 0.6, new)
    else:
        shape, rows, rows_b = Rectangle(120, 140, 64), views[1], views[2]
        want = across_reference(clip[:120], dino[:120], clip[120:], dino[120:], 0.8, 0.6)
    ident = {"shape": shape.record()}
    kw = dict(side=64, clip_min=0.8, dino_max=0.6, ranked=False, shape=shape, rows_b=rows_b)
    job = TileJob(tmp_path / "job", ident).open()
    half = list(range(0, len(shape), 2))
    run_job(ray, rows, job, only=half, **kw)  # a first driver mined every other tile, then stopped
    assert sorted(job.done) == half
    with pytest.raises(VhmineError, match="a mining tile failed after 0 retries"):  # a task killed: stops the job
        run_job(ray, rows, job, max_retries=0, crash_marker=str(tmp_path / "killed"), **kw)
    assert (tmp_path / "killed").exists()
    job.close()
    job = TileJob(tmp_path / "job", ident).open()
    before = set(job.done)
    info = run_job(ray, rows, job, **kw)
    assert info["tiles_done_before"] == len(before) >= len(half)
    ledger = [json.loads(line)["tile"] for line in (tmp_path / "job" / "tiles.jsonl").read_text().splitlines()]
    assert sorted(ledger) == list(range(len(shape)))  # every tile mined once: the resumed job only the missing
    chunks = -(-260 // 64) if kind == "band" else 2 + 3
    assert len((tmp_path / "job" / SCAN).read_text().splitlines()) == chunks  # scanned once
    job.close()
    (tmp_path / "job" / SCAN).unlink()  # (a job of an earlier vhmine: its quantiser alone recorded)
    job = TileJob(tmp_path / "job", ident).open()
    assert run_job(ray, rows, job, **kw)["tiles_done_before"] == len(shape)
    assert not (tmp_path / "job" / SCAN).exists()  # a recorded quantiser is not scanned again
    parts = [job.rows(k)[:] for k in sorted(job.done)]
    p = np.concatenate(parts)
    p = p[np.lexsort((p["j"], p["i"]))]
    got = PairSet(p["i"], p["j"], p["clip"], p["dino"])
    job.close()
    assert len(want) > 20
    assert np.array_equal(got.i, want.i) and np.array_equal(got.j, want.j)
    assert np.array_equal(got.clip_sim, want.clip_sim) and np.array_equal(got.dino_sim, want.dino_sim)


def test_a_bands_scattered_rows_are_read_a_span_of_rows_at_a_time(tmp_path):
    """take reads runs of near rows whole (rows up to 256 apart, for a URL); a band's chunk of new rows,
    scattered so, would have been one read of 200 x its rows."""
    from vhmine.index.rows import VectorFile, open_vectors
    from vhmine.mine.ray.tiletask import take_within

    x = np.arange(40_000 * 4, dtype=np.float32).reshape(40_000, 4)
    np.save(tmp_path / "x.npy", x)
    vf = open_vectors(tmp_path / "x.npy")
    reads = []

    class Counted(VectorFile):
        def read(self, start, stop):
            reads.append(stop - start)
            return super().read(start, stop)

    counted = Counted(f"file://{tmp_path / 'x.npy'}", vf.offset, vf.rows, vf.dim)  # a URL: runs 256 apart are one read
    numbers = np.arange(3, 40_000, 200)
    assert np.array_equal(take_within(counted, numbers, 64 * 4), x[numbers])
    assert max(reads) <= 64 * 4 and len(reads) == len(numbers) // 2  # (200 rows apart: two rows a read)
    reads.clear()
    assert np.array_equal(counted.take(numbers), x[numbers]) and max(reads) > 100 * 64 * 4  # what take alone does
