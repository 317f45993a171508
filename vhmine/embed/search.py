"""Nearest-neighbour search over an index's vectors with faiss: on every GPU the installed faiss can use
(faiss.get_num_gpus() > 0: faiss-gpu-cu12 installed in place of faiss-cpu), else on the CPU, with the
same neighbours. Reads and writes nothing.

`range_search(base, queries, radius)` gives, for each query, every base row whose inner product exceeds
`radius`, as faiss.IndexFlatIP.range_search does. faiss's GPU indexes have no range search, so there it is
a k-nearest-neighbour search whose k doubles until each query's k-th neighbour is at or below the radius:
then every row above the radius is among those k (a row with a larger product than the k-th neighbour is
one of the k nearest), which is range_search's set. Queries that would need more neighbours than a GPU
search returns (MAX_GPU_K) are answered by range_search on the CPU. GPU and CPU float32 sums round
differently (about 1e-6 at 768 dims): callers search a little below their threshold and re-check in float64.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)

MAX_GPU_K = 2048  # faiss's GPU k-selection returns at most this many neighbours
FIRST_K = 64


def gpus() -> int:
    """GPUs the installed faiss can search on (0 with faiss-cpu)."""
    import faiss

    return int(getattr(faiss, "get_num_gpus", lambda: 0)())


def _flat(base: np.ndarray, on_gpus: bool):
    import faiss
    import numpy as np

    index = faiss.IndexFlatIP(base.shape[1])
    index.add(np.ascontiguousarray(base, dtype=np.float32))
    return faiss.index_cpu_to_all_gpus(index) if on_gpus else index


def range_search(base: np.ndarray, queries: np.ndarray, radius: float, *, on_gpus: bool | None = None):
    """(lims, sims, ids) in faiss.range_search's layout: query q's neighbours are ids[lims[q]:lims[q + 1]].
    on_gpus: [default: whenever faiss has GPUs]."""
    import numpy as np

    queries = np.ascontiguousarray(queries, dtype=np.float32)
    if on_gpus is None:
        on_gpus = gpus() > 0
    if not on_gpus:
        return _flat(base, False).range_search(queries, float(radius))
    log.info("near-duplicate search on %d GPU(s) (faiss)", gpus())
    return knn_range(_flat(base, True), queries, radius, cpu=lambda: _flat(base, False), max_k=MAX_GPU_K)


def knn_range(index, queries: np.ndarray, radius: float, *, cpu=None, max_k: int | None = None, first_k: int = FIRST_K):
    """range_search's answer from k-nearest-neighbour searches of `index` (see the module docstring);
    cpu() gives a CPU index for the queries that need more than max_k neighbours."""
    import numpy as np

    n, total = len(queries), index.ntotal
    if total == 0:
        return np.zeros(n + 1, np.int64), np.empty(0, np.float32), np.empty(0, np.int64)
    found: list = [None] * n
    todo = np.arange(n)
    k = min(first_k, total)
    while len(todo) and k > 0:
        sims, ids = index.search(queries[todo], k)
        complete = (sims[:, -1] <= radius) | (k >= total)
        for r in np.flatnonzero(complete):
            keep = (sims[r] > radius) & (ids[r] >= 0)
            found[todo[r]] = (sims[r][keep], ids[r][keep])
        todo = todo[~complete]
        if max_k is not None and k >= max_k:
            break
        k = min(2 * k, total, max_k or total)
    if len(todo):  # more neighbours above the radius than a GPU search returns
        lims, sims, ids = cpu().range_search(queries[todo], float(radius))
        for t, q in enumerate(todo):
            found[q] = (sims[lims[t] : lims[t + 1]], ids[lims[t] : lims[t + 1]])
    lims = np.concatenate([[0], np.cumsum([len(f[1]) for f in found])]).astype(np.int64)
    sims = np.concatenate([f[0] for f in found]) if n else np.empty(0, np.float32)
    ids = np.concatenate([f[1] for f in found]).astype(np.int64) if n else np.empty(0, np.int64)
    return lims, sims, ids
