"""vhmine.mine.ray.merge: tiles' sorted lists merged in rank order (several passes when there are many) and
capped as job.rank_pairs caps the whole list."""

import numpy as np
import pytest

from vhmine.mine.ray.merge import capped, ranked
from vhmine.mine.ray.tilejob import TileJob, rank_order, ranked_dtype
from vhmine.mine.runfolder import rank_pairs


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
