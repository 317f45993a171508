"""mine.idjoin and mine.growjoin: the Ray driver's joins by image id, streamed from disk in buckets, give what
mine.grow's and mine.join.shared's in-memory joins give (the new rows, the kept / removed / changed counts, the
earlier pairs renumbered, the images in both indexes), whatever the number of buckets; ids hash alike at any
width."""

from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vhmine.mine import grow, growjoin, idjoin, state
from vhmine.mine.join import shared_ids

ID = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=12)


def _images(path, ids):
    pq.write_table(pa.table({"image_id": pa.array(list(ids), pa.string())}), path, row_group_size=7)
    return str(path)


def _rows(path, ids):
    width = max([len(x.encode()) for x in ids], default=1)
    return SimpleNamespace(images=_images(path, ids), n=len(ids), id_width=width)


def _earlier(folder, ids, digests, pairs):
    folder.mkdir()
    state.write_rows(folder, np.array(ids, dtype=object), np.array(digests, np.uint64))
    with state.AlikeWriter(folder) as w:
        a, b, c, d = zip(*pairs) if pairs else ([], [], [], [])
        w.add(list(a), list(b), np.array(c, float), np.array(d, float))
    return grow.Earlier(folder, {"run_id": "r"})


@st.composite
def growths(draw):
    pool = draw(st.lists(ID, min_size=2, max_size=40, unique=True))
    earlier = draw(st.lists(st.sampled_from(pool), unique=True, min_size=2, max_size=len(pool)))  # (a run mines >= 2)
    now = draw(st.permutations([x for x in pool if draw(st.booleans()) or x not in earlier]))
    digest = {x: draw(st.integers(0, 3)) for x in pool}
    changed = {x: draw(st.integers(0, 3)) for x in pool}  # the digest now (equal: kept)
    pairs = []
    for _ in range(draw(st.integers(0, 30)) if len(earlier) > 1 else 0):
        a, b = draw(st.sampled_from(earlier)), draw(st.sampled_from(earlier))
        if a != b:
            a, b = min(a, b), max(a, b)
            pairs.append((a, b, draw(st.floats(0.5, 1)), draw(st.floats(0, 1))))
    bucket_rows = draw(st.sampled_from([1, 2, 3, 5, 1 << 18]))
    return earlier, now, digest, changed, pairs, bucket_rows


def _check_growth(tmp_path, earlier_ids, now, digest, changed, pairs, bucket_rows, monkeypatch):
    monkeypatch.setattr(idjoin, "BUCKET_ROWS", bucket_rows)
    pairs = list({(a, b): (a, b, c, d) for a, b, c, d in pairs}.values())
    earlier = _earlier(tmp_path / "run", earlier_ids, [digest[x] for x in earlier_ids], pairs)
    rows = _rows(tmp_path / "images.parquet", now)
    now_digests = np.array([changed[x] for x in now], np.uint64)
    ids = np.array(now, dtype=object)
    want = grow.growth(earlier, ids, now_digests)
    join = growjoin.GrowthJoin(earlier, rows, tmp_path / "scratch")
    try:
        np.testing.assert_array_equal(join.new_rows, want.new_rows)  # (known before the scan)
        parts = np.array_split(now_digests, 3)  # (the scan's chunks: cut anywhere)
        got = join.growth(iter(parts))
        assert (got.kept, got.removed, got.changed) == (want.kept, want.removed, want.changed)
        i, j, c, d = grow.old_pairs(earlier, ids)
        buckets = list(join.old_pairs())
        assert len(buckets) == idjoin.buckets_for(len(now), len(earlier_ids))
        gi, gj, gc, gd, id_i, id_j = (np.concatenate([b[k] for b in buckets]) for k in range(6))
        order, at = np.lexsort((gj, gi)), np.lexsort((j, i))
        np.testing.assert_array_equal(np.c_[gi, gj][order], np.c_[i, j][at])
        np.testing.assert_array_equal(np.c_[gc, gd][order], np.c_[c, d][at])
        assert [x.decode() for x in id_i] == [now[k] for k in gi] and [x.decode() for x in id_j] == [now[k] for k in gj]
        if idjoin.buckets_for(len(now), len(earlier_ids)) == 1:  # one bucket: mine.grow's order, as it was
            np.testing.assert_array_equal(np.c_[gi, gj], np.c_[i, j])
    finally:
        join.remove()
    assert not (tmp_path / "scratch").exists()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(growths())
def test_the_streamed_growth_join_is_the_in_memory_one_property(tmp_path_factory, monkeypatch, case):
    _check_growth(tmp_path_factory.mktemp("g"), *case, monkeypatch)


def test_every_row_kept_removed_or_new_in_many_buckets(tmp_path, monkeypatch):
    """A named case: every kind of row at once, with more buckets than some of them fill."""
    earlier = ["a", "b", "c", "dé", "e"]
    now = ["e", "x", "b", "dé", "yy", "a"]
    digest = {x: 1 for x in earlier + now}
    changed = {**digest, "b": 2}
    pairs = [("a", "b", 0.9, 0.5), ("b", "dé", 0.95, 0.1), ("a", "c", 0.91, 0.2), ("a", "e", 0.99, 0.9)]
    _check_growth(tmp_path, earlier, now, digest, changed, pairs, 1, monkeypatch)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(ID, min_size=1, max_size=30, unique=True),
    st.lists(ID, min_size=1, max_size=30, unique=True),
    st.sampled_from([1, 4, 1 << 18]),
)
def test_the_streamed_shared_images_are_the_in_memory_ones_property(tmp_path_factory, monkeypatch, a, b, bucket_rows):
    monkeypatch.setattr(idjoin, "BUCKET_ROWS", bucket_rows)
    tmp = tmp_path_factory.mktemp("s")
    b = b + a[: len(a) // 2]  # (some in both)
    b = list(dict.fromkeys(b))
    got = idjoin.shared_ids_streamed(_rows(tmp / "a.parquet", a), _rows(tmp / "b.parquet", b), tmp / "scratch")
    assert [x.decode() for x in got] == list(shared_ids(a, b))


@settings(max_examples=80, deadline=None)
@given(st.lists(ID, max_size=20), st.integers(0, 8))
def test_ids_are_fixed_width_utf8_and_hash_alike_at_any_width(ids, pad):
    width = max([len(x.encode()) for x in ids], default=1)
    col = pa.array(ids, pa.string())
    got = idjoin.fixed_ids(col.slice(0), width)
    assert [x.decode() for x in got] == ids
    wider = idjoin.fixed_ids(pa.chunked_array([col[: len(ids) // 2], col[len(ids) // 2 :]], pa.string()), width + pad)
    np.testing.assert_array_equal(idjoin.id_hash(got), idjoin.id_hash(wider))


def test_ids_of_one_shape_spread_evenly_over_buckets():
    """Hex ids (what `vhmine embed` gives) and numbered file names: no bucket holds much more than its share."""
    import hashlib

    for ids in (
        [hashlib.sha256(str(k).encode()).hexdigest()[:16] for k in range(8000)],
        [f"{k}.jpg" for k in range(8000)],
    ):
        counts = np.bincount(
            (idjoin.id_hash(idjoin.fixed_ids(pa.array(ids), 16)) % np.uint64(8)).astype(int), minlength=8
        )
        assert counts.max() < 1.1 * 1000 and counts.min() > 0.9 * 1000, counts


def test_an_id_wider_than_the_width_is_refused_not_cut():
    with pytest.raises(ValueError, match="wider than 3"):
        idjoin.fixed_ids(pa.array(["abcd"]), 3)


def test_ids_at_reads_the_given_rows_in_their_order(tmp_path):
    ids = [f"img{k:03d}" for k in range(50)]
    path = _images(tmp_path / "i.parquet", ids)
    rows = np.array([49, 3, 3, 0, 17])
    assert [x.decode() for x in idjoin.ids_at(path, rows, 6)] == [ids[k] for k in rows]
