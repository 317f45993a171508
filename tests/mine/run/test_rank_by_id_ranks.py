"""mine.rank.id_ranks: the local engine ranks, orients and writes its pairs by the ranks of the image ids,
not by the ids as Python strings; these check that the ranks order and tie as the strings do, and that every
result built from them is what the strings give (the old path, rebuilt here)."""

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from vhmine.mine.join import PairSet
from vhmine.mine.rank import id_ranks, ranked
from vhmine.mine.run import MineOptions
from vhmine.mine.state import write_state

# ids of a few letters, non-ASCII ones among them (UTF-8's byte order against Python's code-point order), and
# repeats (equal ids: one rank)
ids_st = st.lists(st.text(alphabet="aAz0é€𝄞_", min_size=0, max_size=4), min_size=2, max_size=40)


@given(ids=ids_st)
def test_property_id_ranks_order_and_tie_as_the_strings_do(ids):
    rank = id_ranks(pa.array(ids, pa.string()))
    for a in range(len(ids)):
        for b in range(len(ids)):
            assert (rank[a] < rank[b]) == (ids[a] < ids[b])
            assert (rank[a] == rank[b]) == (ids[a] == ids[b])


def _pairs(n: int, seed: int, k: int = 60) -> PairSet:
    rng = np.random.default_rng(seed)
    i, j = rng.integers(0, n, k), rng.integers(0, n, k)
    keep = i != j
    gap_levels = rng.integers(0, 3, keep.sum()) / 10  # ties of gap, so the ids break them
    clip = 0.9 + gap_levels
    return PairSet(i[keep], j[keep], clip, np.full(keep.sum(), 0.5))


@settings(max_examples=60)
@given(ids=ids_st, seed=st.integers(0, 2**16), per_image=st.sampled_from([None, 1, 2]), most=st.sampled_from([None, 5]))
def test_property_ranked_by_id_ranks_is_ranked_by_the_ids(ids, seed, per_image, most):
    objects = np.array(ids, dtype=object)
    found = _pairs(len(ids), seed)
    opts = MineOptions(dino=0.6, max_per_image=per_image, max_pairs=most)
    want = ranked(found, objects, objects, opts)
    rank = id_ranks(pa.array(ids, pa.string()))
    got = ranked(found, rank, rank, opts)
    # the same rows (so the same pairs, turned the same way) in the same order
    assert np.array_equal(got.a, want.a) and np.array_equal(got.b, want.b)
    for f in ("clip_sim", "dino_sim", "gap"):
        assert np.array_equal(getattr(got, f), getattr(want, f))
    assert (got.in_box, got.cuts) == (want.in_box, want.cuts)


def test_the_growth_state_from_pyarrow_ids_is_the_files_from_python_strings(tmp_path):
    rng = np.random.default_rng(0)
    ids = [f"{k * 2654435761 % 2**40:x}é" if k % 7 == 0 else f"{k * 2654435761 % 2**40:x}" for k in range(3000)]
    i, j = rng.integers(0, 3000, 20_000), rng.integers(0, 3000, 20_000)
    clip, dino = rng.random(20_000), rng.random(20_000)
    digests = rng.integers(0, 2**63, 3000).astype(np.uint64)
    # the old path: Python strings compared pair by pair
    objects = np.array(ids, dtype=object)
    lo, hi = objects[i], objects[j]
    (tmp_path / "old").mkdir()
    write_state(tmp_path / "old", objects, digests, np.where(lo < hi, lo, hi), np.where(lo < hi, hi, lo), clip, dino)
    # the new one (mine.local_run.mine_one): ranks compared, the ids taken by pyarrow
    text = pa.array(ids, pa.string())
    rank = id_ranks(text)
    turn = rank[i] > rank[j]
    a, b = np.where(turn, j, i), np.where(turn, i, j)
    (tmp_path / "new").mkdir()
    write_state(tmp_path / "new", text, digests, text.take(a), text.take(b), clip, dino)
    for name in ("rows.parquet", "alike.parquet"):
        assert (tmp_path / "new" / name).read_bytes() == (tmp_path / "old" / name).read_bytes()
    alike = pq.read_table(tmp_path / "new" / "alike.parquet")
    assert all(x <= y for x, y in zip(alike["image_id_a"].to_pylist(), alike["image_id_b"].to_pylist()))
