"""vhmine.mine.ray.merge: tiles' sorted lists merged in rank order (several passes when there are many) and
capped as rank.rank_pairs caps the whole list."""

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vhmine.mine.rank import rank_pairs
from vhmine.mine.ray.merge import capped, ranked
from vhmine.mine.ray.tilejob import TileJob, rank_order, ranked_dtype


def random_pairs(n, seed):
    """Ranked rows with many exact gap ties and repeated images (ids of varying length)."""
    rng = np.random.default_rng(seed)
    ids = np.array([f"img{k}".encode() for k in range(60)])
    out = np.zeros(n, ranked_dtype(6))
    a, b = rng.integers(0, 60, n), rng.integers(0, 60, n)
    b = np.where(a == b, (b + 1) % 60, b)
    swap = ids[a] > ids[b]
    out["a"], out["b"] = np.where(swap, b, a), np.where(swap, a, b)
    out["id_a"], out["id_b"] = ids[out["a"]], ids[out["b"]]
    out["lo"], out["hi"] = np.minimum(a, b), np.maximum(a, b)
    out["gap"] = rng.integers(0, 12, n) / 8  # few values: ties everywhere
    out["clip"] = out["gap"] + 0.2
    return out


@pytest.mark.parametrize("fan_in, chunk", [(64, 8192), (3, 5), (2, 1)])
def test_many_sorted_tiles_merge_into_one_rank_order(tmp_path, fan_in, chunk):
    job = TileJob(tmp_path / "job", {}).open()
    every = []
    for k in range(11):
        part = random_pairs(int(np.random.default_rng(k).integers(0, 40)), k)
        part = part[rank_order(part)]
        job.record(k, part, {"kept": len(part)})
        every.append(part)
    every = np.concatenate(every)
    got = np.concatenate(list(ranked(job, range(11), tmp_path / "job" / "merge", chunk=chunk, fan_in=fan_in)))
    assert np.array_equal(got, every[rank_order(every)])
    assert not (tmp_path / "job" / "merge").exists()  # the intermediate passes are cleaned up
    job.close()


@pytest.mark.parametrize("m, k", [(None, 17), (1, None), (2, 30), (3, 5)])
def test_caps_over_chunks_equal_rank_pairs_over_the_whole_list(m, k):
    rows = random_pairs(400, 99)
    rows = rows[rank_order(rows)]
    ids_a, ids_b = (
        np.array([x.decode() for x in rows["id_a"]], object),
        np.array([x.decode() for x in rows["id_b"]], object),
    )
    want = rank_pairs(ids_a, ids_b, rows["gap"], max_per_image=m, max_pairs=k)
    # rank_pairs' own order on these rows (they are already in it) is the identity
    assert np.array_equal(rank_pairs(ids_a, ids_b, rows["gap"]), np.arange(len(rows)))
    got = np.concatenate(
        list(capped((rows[s : s + 37] for s in range(0, len(rows), 37)), max_per_image=m, max_pairs=k))
    )
    assert np.array_equal(got, rows[want]) and len(got) > 4


A_IDS = [f"img{k}" for k in range(7)]  # rows 0..6 of A
B_IDS = [f"img{k}" for k in range(3, 10)]  # rows 0..6 of B: img3..img6 are in both


def across_rows(pairs):
    """A rectangle's ranked rows (a: row of A, b: row of B, never swapped) of (row a, row b, gap, in box)."""
    out = np.zeros(len(pairs), ranked_dtype(5))
    for t, (ra, rb, g, box) in enumerate(pairs):
        out[t]["a"], out[t]["b"], out[t]["lo"], out[t]["hi"] = ra, rb, ra, rb
        out[t]["id_a"], out[t]["id_b"] = A_IDS[ra].encode(), B_IDS[rb].encode()
        out[t]["gap"], out[t]["clip"], out[t]["dino"] = g / 4, g / 4 + 0.5, 0.3 if box else 0.9
    return out


@given(
    pairs=st.lists(
        st.tuples(st.integers(0, 6), st.integers(0, 6), st.integers(0, 3), st.booleans(), st.integers(0, 2)),
        unique_by=lambda p: p[:2],
    ),
    m=st.sampled_from([None, 1, 2]),
    k=st.sampled_from([None, 3, 10]),
)
def test_property_shared_images_dropped_from_tiles_equal_keep_across_before_rank_pairs(pairs, m, k):
    """A rectangle whose indexes share images, its pairs spread over tiles: shared_drops, then the merge and
    the caps give mine_across's pairs (keep_across over every CLIP-alike pair, then the box, then rank_pairs),
    with the CLIP-alike and in-box pairs it drops counted."""
    from vhmine.mine.join.shared import keep_across
    from vhmine.mine.ray.merge import shared_drops, without
    from vhmine.mine.ray.tilejob import box_first

    rows = across_rows([p[:4] for p in pairs])
    rows = rows[np.lexsort((rows["hi"], rows["lo"]))]  # as find_pairs_across gives them: row order
    ids_a, ids_b = rows["id_a"].astype(str).astype(object), rows["id_b"].astype(str).astype(object)
    box = rows["dino"] <= 0.5
    kept = keep_across(ids_a, ids_b, prefer=box)
    inside = kept & box
    order = rank_pairs(ids_a[inside], ids_b[inside], rows["gap"][inside], max_per_image=m, max_pairs=k)
    want = rows[inside][order]
    with tempfile.TemporaryDirectory() as tmp:
        job = TileJob(Path(tmp) / "job", {}).open()
        tile_of = {p[:2]: p[4] for p in pairs}
        for t in range(3):
            part = rows[np.array([tile_of[(int(r["a"]), int(r["b"]))] == t for r in rows], bool)]
            out, n_in, _ = box_first(part, part["dino"] <= 0.5, None)
            job.record(t, out, {"kept": n_in})
        shared = np.array([x.encode() for x in sorted(set(A_IDS) & set(B_IDS))])
        drop, less_alike, less_box = shared_drops(job, range(3), shared, 0.5)
        merged = without(ranked(job, range(3), Path(tmp) / "job" / "merge", chunk=2), drop)
        got = list(capped(merged, max_per_image=m, max_pairs=k))
        job.close()
    got = np.concatenate(got) if got else rows[:0]
    assert np.array_equal(got, want)
    assert (less_alike, less_box) == (int((~kept).sum()), int((~kept & box).sum()))
