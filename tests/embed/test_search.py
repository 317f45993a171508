"""vhmine.embed.search: the GPU path's k-nearest-neighbour search with doubling k finds exactly the rows
faiss's range_search finds (run here on a CPU index; scripts/gpu_check.sh runs it on GPUs), and the CPU
path is range_search itself."""

import numpy as np
import pytest

from vhmine.embed.search import _flat, gpus, knn_range, range_search


def as_sets(lims, sims, ids):
    return [
        dict(zip(ids[lims[q] : lims[q + 1]].tolist(), sims[lims[q] : lims[q + 1]].tolist()))
        for q in range(len(lims) - 1)
    ]


@pytest.fixture()
def data():
    rng = np.random.default_rng(0)
    base = rng.standard_normal((3000, 32))
    base[:600] = np.repeat(rng.standard_normal((20, 32)), 30, axis=0) + 0.2 * rng.standard_normal((600, 32))
    base = (base / np.linalg.norm(base, axis=1, keepdims=True)).astype(np.float32)
    queries = np.concatenate([base[::97], base[:600:31]])  # some with a few neighbours, some with 30
    return base, queries


@pytest.mark.parametrize("first_k, max_k", [(64, None), (1, None), (2, 8)])
def test_knn_with_doubling_k_equals_range_search(data, first_k, max_k):
    base, queries = data
    want = _flat(base, False).range_search(queries, 0.7)
    assert max(np.diff(want[0])) > 8 and min(np.diff(want[0])) >= 1  # queries that need k past 8
    cpu_used = []

    def cpu():
        cpu_used.append(1)
        return _flat(base, False)

    got = knn_range(_flat(base, False), queries, 0.7, cpu=cpu, max_k=max_k, first_k=first_k)
    assert as_sets(*got) == as_sets(*want)
    assert bool(cpu_used) == (max_k == 8)  # only queries past max_k fall back to range_search


def test_the_cpu_path_is_faiss_range_search(data):
    base, queries = data
    assert gpus() == 0 or gpus() > 0  # an int either way; the CPU path is forced here
    got = range_search(base, queries, 0.7, on_gpus=False)
    assert as_sets(*got) == as_sets(*_flat(base, False).range_search(queries, 0.7))
    empty = knn_range(_flat(base[:0], False), queries[:3], 0.7)
    assert empty[0].tolist() == [0, 0, 0, 0] and len(empty[2]) == 0
