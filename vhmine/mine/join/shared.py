"""Images in both collections of a rectangle (`vhmine mine --against`): the pairs of A x B as a set of
unordered pairs of two different images. An image in both A and B (the same image id: the same bytes) would
otherwise give a pair with itself (x from A, x from B), and two such images x, y the same pair twice, as
(x from A, y from B) and (y from A, x from B). Both engines keep a rectangle's pairs through `keep_across`
(mine.local_run on its pairs; the Ray run through mine.ray.merge.shared_drops, on its tiles' pairs).
Reads and writes nothing.
"""

from __future__ import annotations

import numpy as np


def shared_ids(ids_a, ids_b) -> np.ndarray:
    """The image ids in both collections (sorted, unique)."""
    return np.intersect1d(np.asarray(ids_a, dtype=object), np.asarray(ids_b, dtype=object))


def keep_across(id_a, id_b, prefer=None) -> np.ndarray:
    """A mask over pairs of the rectangle (id_a[k] from A, id_b[k] from B: the pairs' image ids) keeping each
    unordered pair of two different images once: no pair of an image with itself; of a pair found both as
    (x, y) and as (y, x) (x and y both in A and B), the one `prefer` marks (say, the one in the box, where
    the two indexes' vectors of one image differ), else the one with id_a < id_b. The mask does not depend
    on the pairs' order."""
    id_a, id_b = np.asarray(id_a, dtype=object), np.asarray(id_b, dtype=object)
    keep = id_a != id_b
    if not keep.any():
        return keep
    lo, hi = np.where(id_a < id_b, id_a, id_b), np.where(id_a < id_b, id_b, id_a)
    rank = np.where(id_a < id_b, 0, 1)  # among the two orientations of one pair: lower first
    if prefer is not None:
        rank = rank + np.where(np.asarray(prefer, bool), 0, 2)
    # the best-ranked orientation of each unordered pair (lexsort: the last key is the first sorted by)
    at = np.flatnonzero(keep)
    order = at[np.lexsort((rank[at], hi[at], lo[at]))]
    first = np.ones(len(order), bool)
    first[1:] = (lo[order][1:] != lo[order][:-1]) | (hi[order][1:] != hi[order][:-1])
    keep[:] = False
    keep[order[first]] = True
    return keep
