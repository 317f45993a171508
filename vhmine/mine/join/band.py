"""Which blocks an exact search covers, and running them: the upper triangle of all rows (a full mine), the
band of the pairs that touch the first K rows (an index that grew: its new rows put first), or the
rectangle of one collection's rows against another's (A's rows, then B's, as simsearch stacks them); and the
order that puts an index's new rows first (new_first, Band.layout). Reads the arrays and quantised rows it
is given; writes nothing. simsearch.find_pairs and simsearch.find_pairs_across run their blocks through it.

A search over rows laid out so is a Band: the pairs (i, j), i < j, with i < rows and j >= cols_from.
Its blocks are those of the triangle whose rows start below `rows` and whose columns reach `cols_from`,
so a band over K new rows of N computes about K x N products, not N^2 / 2; candidates outside it (rows
of the last 64-row group past `rows`, columns of the group before `cols_from`) are dropped before their
re-check.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vhmine.errors import InputError
from vhmine.mine.join.quantise import ALIGN


def _up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


@dataclass(frozen=True, eq=False)
class Band:
    """The pairs (i, j), i < j < n, with i < rows and j >= cols_from (0: a triangle or band; rows: a
    rectangle, rows A and the rest B), of rows searched in the order `order` (order[k]: the caller's
    number of the k-th row searched; None: the caller's own order). The candidates come out in the
    caller's numbers (i > j where the order swaps them), so the re-check reads the caller's rows: no
    copy of the float rows, only of the quantised ones (layout)."""

    n: int
    rows: int
    cols_from: int = 0
    order: np.ndarray | None = None

    def layout(self, q: np.ndarray) -> np.ndarray:
        """The quantised rows q (the caller's order, zero rows after n) in the order searched."""
        if self.order is None:
            return q
        rows = np.ascontiguousarray(q).view(np.dtype((np.void, q.shape[1] * q.itemsize)))[:, 0]  # one item a row:
        out = np.zeros_like(q)  # a gather of whole rows is 2-3x faster than q[order]'s of bytes
        out[: self.n] = rows[self.order].view(q.dtype).reshape(self.n, q.shape[1])
        return out

    def tiles(self, block: int) -> list[tuple[int, int]]:
        """First rows of the (row block, column block) pairs that hold the band's pairs (block: a multiple
        of 64): row blocks up to the 64-row group holding row `rows` - 1, column blocks from the one at
        or right of the row block (the triangle's) or from the 64-row group holding cols_from."""
        col0 = self.cols_from // ALIGN * ALIGN
        return [(r, c) for r in range(0, _up(self.rows), block) for c in range(max(r, col0), _up(self.n), block)]

    def row_end(self) -> int:
        """Rows past this are not the band's in any row block: the end of the last 64-row group of `rows`."""
        return _up(self.rows)

    def pairs(self) -> int:
        """The number of distinct row pairs the band covers (a triangle or band: cols_from 0; a rectangle:
        cols_from = rows)."""
        k, n = self.rows, self.n
        if self.cols_from >= k:
            return k * (n - self.cols_from)
        return k * (k - 1) // 2 + k * (n - k)

    def keep(self, i: np.ndarray, j: np.ndarray) -> np.ndarray | None:
        """Which candidates (i < j in the order searched, from BlockMiner.search) are the band's; None: all."""
        if self.rows >= self.n and self.cols_from == 0:
            return None
        return (i < self.rows) & (j >= self.cols_from)


def new_first(new_rows, n: int) -> Band:
    """The band of the pairs that touch new_rows among n rows: the K distinct new rows searched first
    (ascending), then the others; InputError when new_rows is not a 1-D array of integers in [0, n)."""
    a = np.asarray(new_rows)
    if a.ndim != 1 or not (a.size == 0 or np.issubdtype(a.dtype, np.integer)):
        raise InputError(f"new_rows must be a 1-D array of row numbers, got {a.dtype} with shape {a.shape}")
    a = np.unique(a.astype(np.int64))
    if len(a) and (a[0] < 0 or a[-1] >= n):
        bad = int(a[0] if a[0] < 0 else a[-1])
        raise InputError(
            f"new_rows holds row {bad}, outside the {n:,} rows [0, {n}); "
            "give the row numbers of the new rows among all of them"
        )
    old = np.ones(n, bool)
    old[a] = False
    return Band(n, len(a), 0, np.concatenate([a, np.flatnonzero(old)]))


def check_same_dims(name: str, a: np.ndarray, b: np.ndarray) -> None:
    if a.shape[1:] != b.shape[1:]:
        raise InputError(
            f"{name} vectors of the two collections differ in dimension: {a.shape} against {b.shape}; "
            "mine across collections embedded by the same encoders"
        )


def unit_pairs(blocks, block: int, row_end: int, unit_rows: int) -> list[tuple[int, int, int, int]]:
    """(block number, r, c, s): the chunks of unit_rows rows (from r + s) of each block's rows below row_end."""
    return [(b, r, c, s) for b, (r, c) in enumerate(blocks) for s in range(0, min(block, row_end - r), unit_rows)]


def too_many_candidates(total: int, clip_min: float, done: int, blocks: int, limit: int) -> InputError:
    return InputError(
        f"{total:,} pairs already have CLIP cosine near or above {clip_min:g} after {done} of "
        f"{blocks} blocks, more than the limit of {limit:,} candidates; "
        f"raise --clip above {clip_min:g} so that fewer pairs qualify"
    )


def _search(m, band: Band, x, y, r: int, c: int):
    """BlockMiner m's candidates of x (rows r..) against y (rows c..) that are the band's, with products."""
    i, j, p = m.search(x, y, r, c)
    keep = band.keep(i, j)
    if keep is not None and not keep.all():
        i, j, p = i[keep], j[keep], p[keep]
    return (i, j, p) if band.order is None else (band.order[i], band.order[j], p)


def mine_blocks(miner, q, band: Band, block: int, max_candidates: int, clip_min: float, bar):
    """(found, total): the band's blocks of the quantised rows q, one at a time through one BlockMiner
    (miner(): a GPU, or a CPU in torch's own threads); found: re-checked parts, total: candidates."""
    import torch

    blocks, end = band.tiles(block), band.row_end()
    found, total, m = [], 0, miner()
    with torch.inference_mode():
        for b, (r, c) in enumerate(blocks):
            i, j, p = _search(m, band, q[r : min(r + block, end)], q[c : c + block], r, c)
            total += len(i)
            if total > max_candidates:
                raise too_many_candidates(total, clip_min, b + 1, len(blocks), max_candidates)
            if len(i):
                found.append(m.recheck(i, j, p))
            bar.update()
    return found, total


_UNIT_ROWS = 2048  # rows of a block that one thread takes through products, search and re-check at a time


def mine_in_threads(miner, q, band: Band, block: int, pool, max_candidates: int, clip_min: float, bar):
    """mine_blocks' result on a CPU, as chunks of rows that the pool's threads (torch single-threaded in
    each) take in turn, each through its own BlockMiner: each thread's products, search and (numpy)
    re-check run on one core, so no core waits for another (a thread pool's barriers stall when a busy
    machine takes a core away), and the numpy work of one chunk runs beside the products of another."""
    import threading
    from concurrent.futures import as_completed

    import torch

    local, lock, seen = threading.local(), threading.Lock(), [0]
    blocks, end = band.tiles(block), band.row_end()

    def unit(r, c, s):
        if not hasattr(local, "miner"):
            local.miner = miner(span=_UNIT_ROWS)
        with torch.inference_mode():
            x = q[r + s : min(r + s + _UNIT_ROWS, r + block, end)]
            i, j, p = _search(local.miner, band, x, q[c : c + block], r + s, c)
        with lock:
            seen[0] += len(i)
            over = seen[0] > max_candidates  # then no re-check: the job stops
        return len(i), (local.miner.recheck(i, j, p) if len(i) and not over else None)

    units = unit_pairs(blocks, block, end, _UNIT_ROWS)
    left = [0] * len(blocks)
    for b, *_ in units:
        left[b] += 1
    found, total, done = [], 0, 0
    futures = {pool.submit(unit, r, c, s): b for b, r, c, s in units}
    try:
        for f in as_completed(futures):
            count, part = f.result()
            total += count
            if total > max_candidates:
                raise too_many_candidates(total, clip_min, done + 1, len(blocks), max_candidates)
            if part is not None:
                found.append(part)
            b = futures[f]
            left[b] -= 1
            if not left[b]:
                done += 1
                bar.update()
    finally:
        for f in futures:
            f.cancel()
    return found, total
