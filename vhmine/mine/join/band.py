"""Which products an exact search computes, and running them: the parts of a shape (Part: quantised rows
searched against quantised rows, a triangle or a rectangle), and the two drivers that take every part's blocks
through a BlockMiner (mine_blocks: one block at a time; mine_in_threads: chunks of rows in a pool of threads,
with the re-checks batched). Reads the arrays and quantised rows it is given; writes nothing.
parts_of builds the parts of each shape (for vhmine.mine.join.search):

- the upper triangle of all rows (a full mine): one triangle part, in the caller's row order (or, pruned,
  in vhmine.mine.join.prune's order);
- the band of the pairs that touch K new rows of N (a grown index): the new rows, gathered, against every
  row where it is (a rectangle whose pairs of two new rows come once: `dedupe`), about K x N products and no
  copy of the other rows; or, with the other rows' quantisation kept from an earlier join, the new rows
  against those rows and the triangle of the new rows;
- the rectangle of one collection's rows against another's.

A candidate's rows come out in the caller's numbers (Part.xmap, Part.ymap), so the re-check reads the caller's
float rows: no copy of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vhmine.errors import InputError
from vhmine.mine.join.quantise import ALIGN, Quantised
from vhmine.mine.join.rowcheck import blas_threads


def up(n: int) -> int:
    """n rounded up to a multiple of ALIGN."""
    return -(-n // ALIGN) * ALIGN


@dataclass(frozen=True, eq=False)
class Part:
    """Rows x searched against rows y (quantised, each zero-padded to a multiple of 64 rows; nx, ny real):
    a triangle (x is y, pairs p < q only) or a rectangle (every pair). xmap, ymap: the caller's number of
    each position (an array; an int: the position plus it; None: the position). dedupe: a mask over the
    caller's rows; a pair (i, j) with dedupe[j] and i >= j is dropped (a band's pairs of two new rows, which
    its rectangle holds twice, and a row with itself). skip(row, rows, col, cols): pieces that provably hold
    no candidate (vhmine.mine.join.prune), or None."""

    x: object
    y: object
    nx: int
    ny: int
    triangle: bool
    xmap: np.ndarray | int | None = None
    ymap: np.ndarray | int | None = None
    dedupe: np.ndarray | None = None
    skip: object = None

    def tiles(self, block: int) -> list[tuple[int, int]]:
        """First positions (r, c) of its blocks (block: a multiple of 64): a triangle's c >= r."""
        rows, cols = range(0, up(self.nx), block), range(0, up(self.ny), block)
        return [(r, c) for r in rows for c in cols if not self.triangle or c >= r]

    def pairs(self) -> int:
        """The row pairs it covers (a dedupe'd rectangle: each distinct pair once)."""
        if self.triangle:
            return self.nx * (self.nx - 1) // 2
        if self.dedupe is not None:  # new rows (x, all of them new) against every row
            return self.nx * (self.nx - 1) // 2 + self.nx * (self.ny - self.nx)
        return self.nx * self.ny

    def caller(self, p: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """Candidates at positions (p of x, q of y) in the caller's numbers, and which to keep (None: all):
        a dedupe'd rectangle keeps each pair once."""
        i, j = _numbers(p, self.xmap), _numbers(q, self.ymap)
        if self.dedupe is None:
            return i, j, None
        keep = (~self.dedupe[j] | (i < j)) & (i != j)
        return i[keep], j[keep], keep


def gather(q: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """q's rows `rows` (in that order), zero-padded to a multiple of 64 rows: whole rows at a time (a
    gather of rows as single items is 2-3x faster than numpy's of their bytes)."""
    out = np.zeros((up(len(rows)), q.shape[1]), q.dtype)
    whole = np.ascontiguousarray(q).view(np.dtype((np.void, q.shape[1] * q.itemsize)))[:, 0]
    out[: len(rows)] = whole[rows].view(q.dtype).reshape(len(rows), q.shape[1])
    return out


def _numbers(p: np.ndarray, m) -> np.ndarray:
    if m is None:
        return p
    return p + m if isinstance(m, int) else m[p]


def too_many_candidates(total: int, clip_min: float, done: int, blocks: int, limit: int) -> InputError:
    return InputError(
        f"{total:,} pairs already have CLIP cosine near or above {clip_min:g} after {done} of "
        f"{blocks} blocks, more than the limit of {limit:,} candidates; "
        f"raise --clip above {clip_min:g} so that fewer pairs qualify"
    )


def _search(m, part: Part, r: int, c: int, rows: int, block: int):
    """BlockMiner m's candidates of part's x rows r.. (`rows` of them) against its y rows c.. (a block), in the
    caller's numbers, with their products."""
    p, q, prod = m.search(
        part.x[r : r + rows],
        part.y[c : c + block],
        r,
        c,
        skip=part.skip,
        upper=part.triangle,
        rows_end=part.nx,
        cols_end=part.ny,
    )
    i, j, keep = part.caller(p, q)
    return i, j, (prod if keep is None else prod[keep])


RECHECK_BATCH = 1 << 20  # candidates held before they are re-checked: the re-checks' scattered reads of float
# rows, between blocks, would push the products' rows out of the caches (1M candidates: 20 MB held)
_SPLIT = 1 << 15  # a batch's candidates per re-check task, at least


class _Batches:
    """Candidates (i, j, products) held until a batch is full, to be re-checked together; counted against
    max_candidates."""

    def __init__(self, max_candidates: int, clip_min: float, blocks: int):
        self.limit, self.clip_min, self.blocks = max_candidates, clip_min, blocks
        self.held, self.count, self.total = [], 0, 0

    def add(self, cands, done: int):
        """The batch to re-check now (or None), after adding these candidates; raises past the limit."""
        self.total += len(cands[0])
        if self.total > self.limit:
            raise too_many_candidates(self.total, self.clip_min, done, self.blocks, self.limit)
        if len(cands[0]):
            self.held.append(cands)
            self.count += len(cands[0])
        return self.take() if self.count >= RECHECK_BATCH else None

    def take(self):
        if not self.held:
            return None
        held, self.held, self.count = self.held, [], 0
        return held[0] if len(held) == 1 else tuple(np.concatenate(a) for a in zip(*held))


def mine_blocks(miner, parts: list[Part], block: int, max_candidates: int, clip_min: float, bar):
    """(found, total): every part's blocks, one at a time through one BlockMiner (miner(): a GPU, or a CPU in
    torch's own threads); found: re-checked parts of the result, total: candidates."""
    import torch

    blocks = [(part, r, c) for part in parts for r, c in part.tiles(block)]
    found, m = [], miner()
    batches = _Batches(max_candidates, clip_min, len(blocks))
    with torch.inference_mode():
        for b, (part, r, c) in enumerate(blocks):
            batch = batches.add(_search(m, part, r, c, min(block, up(part.nx) - r), block), b + 1)
            if batch is not None:
                found.append(m.recheck(*batch))
            bar.update()
        batch = batches.take()
        if batch is not None:
            found.append(m.recheck(*batch))
    return found, batches.total


def _split(batch, threads: int) -> list:
    """A batch of candidates in a part per thread (each of _SPLIT at least)."""
    k = max(1, min(threads, len(batch[0]) // _SPLIT))
    cuts = np.linspace(0, len(batch[0]), k + 1).astype(np.int64)
    return [tuple(a[s:e] for a in batch) for s, e in zip(cuts[:-1], cuts[1:], strict=True)]


_UNIT_ROWS = 2048  # rows of a block that one thread takes through products and candidate search at a time


def mine_in_threads(miner, parts: list[Part], block: int, pool, threads: int, max_candidates: int, clip_min, bar):
    """mine_blocks' result on a CPU, as chunks of rows that the pool's threads (torch single-threaded in
    each) take in turn, each through its own BlockMiner, and batches of candidates re-checked in the same
    threads: each thread's products, search and (numpy) re-check run on one core, so no core waits for
    another (a thread pool's barriers stall when a busy machine takes a core away), and the numpy work of a
    re-check runs beside the products of a chunk."""
    import threading
    from concurrent.futures import FIRST_COMPLETED, wait

    import torch

    local = threading.local()
    blocks = [(part, r, c) for part in parts for r, c in part.tiles(block)]

    def own():
        if not hasattr(local, "miner"):
            local.miner = miner(span=_UNIT_ROWS)
        return local.miner

    def unit(part, r, c, s):
        with torch.inference_mode():
            return _search(own(), part, r + s, c, min(_UNIT_ROWS, block - s, up(part.nx) - r - s), block)

    def recheck(batch):
        return own().recheck(*batch)

    units = [(b, part, r, c, s) for b, (part, r, c) in enumerate(blocks) for s in range(0, block, _UNIT_ROWS)]
    units = [u for u in units if u[2] + u[4] < up(u[1].nx)]
    left = [0] * len(blocks)
    for u in units:
        left[u[0]] += 1
    found, done, todo = [], 0, iter(units)
    batches = _Batches(max_candidates, clip_min, len(blocks))
    running: dict = {}

    def submit_units(k: int):  # a few units ahead of the threads, not all: a stop stops soon
        for u in todo:
            running[pool.submit(unit, *u[1:])] = u[0]
            if k <= 1:
                return
            k -= 1

    submit_units(4 * threads)
    try:
        while running:
            finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for f in finished:
                b = running.pop(f)
                if b is None:  # a re-check
                    found.append(f.result())
                    continue
                batch = batches.add(f.result(), done + 1)
                if batch is not None:
                    for part in _split(batch, threads):
                        running[pool.submit(recheck, part)] = None
                left[b] -= 1
                if not left[b]:
                    done += 1
                    bar.update()
                submit_units(1)
            if not running:
                batch = batches.take()
                if batch is not None:
                    for part in _split(batch, threads):
                        running[pool.submit(recheck, part)] = None
    finally:
        for f in running:
            f.cancel()
    return found, batches.total


def mine_parts(rows, qd, parts, how, max_candidates, progress, desc, blocks):
    """(found, candidates): the parts' blocks through BlockMiners (products), in the pool's threads on a CPU
    (mine_in_threads) or one at a time (mine_blocks). rows: (clip, dino, clip_min, dino_max, their squared
    norms' bounds); how: (block, device, the calibrated choice, pool, threads, torch's threads)."""
    from contextlib import nullcontext

    from tqdm import tqdm

    from vhmine.mine.join.products import BlockMiner

    clip, dino, clip_min, dino_max, norms = rows
    block, device, choice, pool, threads, torch_threads = how

    def miner(**kw):
        return BlockMiner(
            clip,
            dino,
            clip_min,
            dino_max,
            qd.thresh,
            len(clip),
            device=device,
            block=block,
            width=parts[0].x.shape[1],
            sure=qd.sure,
            norms=norms,
            kernel=choice.kernel,
            **kw,
        )

    # (numpy's BLAS as the products kernel, one block at a time: in torch's threads, as the others)
    blas = choice.kernel.name == "blas-f32" and pool is None and device.type == "cpu"
    with (
        tqdm(total=blocks, desc=desc, unit="block", disable=not progress) as bar,
        blas_threads(torch_threads) if blas else nullcontext(),
    ):
        if device.type == "cpu" and pool is not None:
            return mine_in_threads(miner, parts, block, pool, threads, max_candidates, clip_min, bar)
        return mine_blocks(miner, parts, block, max_candidates, clip_min, bar)


def others(n: int, rows: np.ndarray) -> np.ndarray:
    """The row numbers in [0, n) not in rows, ascending (a mask: setdiff1d sorts, 100x slower at 200,000)."""
    keep = np.ones(n, bool)
    keep[rows] = False
    return np.flatnonzero(keep)


def parts_of(shape, qd: Quantised, n: int, device) -> list[Part]:
    """The parts the shape's (search.Shape's) pairs are searched in."""
    import functools

    import torch

    t = functools.partial(torch.as_tensor, device=device)  # (numpy's memory itself on a CPU, as from_numpy's)
    if shape.kind == "triangle":
        x = t(qd.fp.q)
        return [Part(x, x, n, n, True)]
    if shape.kind == "across":
        na, nb, q = shape.na, n - shape.na, qd.fp.q
        if not na or not nb:
            return []
        y = q[na:] if na % ALIGN == 0 else np.concatenate([q[na:n], np.zeros((up(nb) - nb, q.shape[1]), q.dtype)])
        return [Part(t(q[: up(na)]), t(y), na, nb, False, ymap=na)]
    new, k = shape.new_rows, len(shape.new_rows)
    if not k:
        return []
    if qd.kept is not None:  # the new rows against the kept rows, and against each other
        x = t(qd.new_q)
        old = others(n, new)
        return [Part(x, t(qd.kept.q), k, len(old), False, new, old), Part(x, x, k, k, True, new, new)]
    x = gather(qd.fp.q, new)
    is_new = np.zeros(n, bool)
    is_new[new] = True
    return [Part(t(x), t(qd.fp.q), k, n, False, new, None, is_new)]
