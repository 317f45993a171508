"""What the join's entries return: PairSet, sorted by (i, j) (`_pairset`), `merge` of parts found in any
order, `no_pairs`. A leaf: imports nothing of the join."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)  # arrays have no truth value: compare with assert_same_pairs
class PairSet:
    """Pairs (i[k], j[k]) with i < j, sorted by (i, j), and their float64 similarities."""

    i: np.ndarray
    j: np.ndarray
    clip_sim: np.ndarray
    dino_sim: np.ndarray

    def __len__(self) -> int:
        return len(self.i)


_RUNS = 8  # sorted runs, at most, that _pairset merges rather than sorts


def _pairset(i, j, clip_sim, dino_sim) -> PairSet:
    # one int64 key, i then j (numpy's vectorised argsort: 8x lexsort's speed); pairs are distinct, so the
    # order is lexsort((j, i))'s
    width = int(j.max()) + 1 if len(j) else 1
    key = i.astype(np.int64) * width + j
    # parts each sorted already (merge of PairSets: a grown index's earlier pairs and its band's): numpy's
    # stable sort (timsort) merges their runs in linear time, 30x its quicksort of 200,000 pairs
    sorted_runs = np.count_nonzero(key[1:] < key[:-1]) < _RUNS
    order = np.argsort(key, kind="stable" if sorted_runs else None)
    return PairSet(i[order], j[order], clip_sim[order], dino_sim[order])


_EMPTY = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0))


def no_pairs() -> PairSet:
    return PairSet(*_EMPTY)


def merge(found: list) -> PairSet:
    """One PairSet, sorted, from the (i, j, clip_sim, dino_sim) parts of blocks in any order."""
    return _pairset(*(np.concatenate(p) for p in zip(*found))) if found else PairSet(*_EMPTY)
