"""Exact similarity join: every pair i < j with CLIP cosine >= clip_min and DINOv2 cosine <= dino_max.

`vhmine mine` (vhmine/mine/local_run.py) reads the rows of `clip.faiss` and `dino.faiss` (float32,
L2-normalised, row i = images.parquet row i), calls `find_pairs`, and ranks and writes the
PairSet it gets back; this module reads and writes no files. A similarity here is always the
float64 inner product of two stored float32 rows as `pair_sims` computes it, and the result equals
`brute_force_pairs` exactly as a set, pairs at either threshold included. find_pairs(new_rows=...)
mines only the pairs that touch an index's new rows (an earlier mine of the other rows plus these is a
full mine, bit for bit), and find_pairs_across the pairs of one collection's rows with another's
(`brute_force_across` its reference); vhmine.mine.join.band lays their rows out and runs just their blocks.
`assert_same_pairs` is the order-insensitive comparator that the tests and scripts/bench_mine.py use.

How: CLIP rows are quantised to small integers once (quantise.fast_pass; first turned by an orthogonal map,
Spread, when a few dimensions dwarf the rest, as in real CLIP embeddings: inner products stay the
same, the quantisation step shrinks), and blocked upper-triangle products of those (products.BlockMiner,
with the exact products kernel measured fastest on this machine: kernels, calibrate; torch, so the same code runs
on a GPU) select candidates with a margin that provably covers the
quantisation and turning error, without ever holding an N x N matrix. Only candidates are re-checked:
(recheck) float32 products with a proven error bound decide the pairs clear of a threshold, float64 ones
(pair_sims) the rest and every pair returned. On a CPU, find_pairs' threads each take chunks of rows
of a block through products, search and re-check, in cache-sized pieces. vhmine.mine.ray.engine runs the
same BlockMiner, one Ray task per tile.
"""

from __future__ import annotations

import logging
import math
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from vhmine.errors import InputError
from vhmine.mine.join import calibrate, kernels
from vhmine.mine.join.band import Band, check_same_dims, mine_blocks, mine_in_threads, new_first
from vhmine.mine.join.products import BlockMiner
from vhmine.mine.join.quantise import ALIGN, fast_pass, in_threads
from vhmine.mine.join.recheck import _U32, _gamma, _recheck, pair_sims
from vhmine.mine.join.rowcheck import check_limits, check_norms

__all__ = [
    "PairSet",
    "assert_same_pairs",
    "brute_force_across",
    "brute_force_pairs",
    "fast_pass",
    "find_new_pairs",
    "find_pairs",
    "find_pairs_across",
    "merge",
    "no_pairs",
    "pair_sims",
]

log = logging.getLogger(__name__)

_DEFAULT_BLOCK = {"cpu": 8192, "cuda": 16384}


@dataclass(frozen=True, eq=False)  # arrays have no truth value: compare with assert_same_pairs
class PairSet:
    """Pairs (i[k], j[k]) with i < j, sorted by (i, j), and their float64 similarities."""

    i: np.ndarray
    j: np.ndarray
    clip_sim: np.ndarray
    dino_sim: np.ndarray

    def __len__(self) -> int:
        return len(self.i)


def _pairset(i, j, clip_sim, dino_sim) -> PairSet:
    order = np.lexsort((j, i))
    return PairSet(i[order], j[order], clip_sim[order], dino_sim[order])


_EMPTY = (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0), np.empty(0))


def no_pairs() -> PairSet:
    return PairSet(*_EMPTY)


def check_rows(clip: np.ndarray, dino: np.ndarray, *, screened: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The rows as contiguous float32 arrays, or InputError naming what is wrong: not 2-D float32, NaN or
    infinite values, row counts that differ, and (screened) norms float32 screening cannot handle."""
    return _checked(clip, dino, screened=screened)[:2]


def _checked(
    clip: np.ndarray, dino: np.ndarray, workers=1, *, screened: bool = True
) -> tuple[np.ndarray, np.ndarray, float, float]:
    """check_rows, plus a bound on the largest squared row norm of each (workers: see in_threads). screened:
    rows are refused whose norms float32 screening cannot handle (rowcheck; float64 alone handles any)."""
    clip, dino = np.ascontiguousarray(clip), np.ascontiguousarray(dino)
    norms = []
    for name, x in (("clip", clip), ("dino", dino)):
        if x.ndim != 2 or x.dtype != np.float32:
            raise InputError(f"{name} vectors must be a 2-D float32 array, got {x.dtype} with shape {x.shape}")
        # one read of the rows: a NaN or infinite value makes its row's sum of squares NaN or infinite;
        # the rows flagged so (also finite rows whose squares overflow) are then looked at value by value
        n2 = np.concatenate(
            [np.empty(0, np.float32)]
            + in_threads(
                lambda s, x=x: np.einsum("ij,ij->i", x[s : s + 8192], x[s : s + 8192]), range(0, len(x), 8192), workers
            )
        )
        bad = np.flatnonzero(~np.isfinite(n2))
        if len(bad):
            bad = bad[~np.isfinite(x[bad]).all(axis=1)]
        if len(bad):
            raise InputError(
                f"{name} row {bad[0]} has NaN or infinite values ({len(bad)} rows in all); "
                "re-run `vhmine embed` for those images"
            )
        if screened:
            check_norms(name, x, n2)
        # a float32 sum of squares is within gamma_d of the exact one (an overflow leaves inf: no bound)
        norms.append(float(n2.max()) / (1 - _gamma(x.shape[1], _U32)) if len(n2) else 0.0)
    if len(clip) != len(dino):
        raise InputError(
            f"clip has {len(clip)} rows but dino has {len(dino)}; the two indexes must be row-aligned "
            "(re-run `vhmine embed`)"
        )
    return clip, dino, norms[0], norms[1]


def brute_force_pairs(clip: np.ndarray, dino: np.ndarray, clip_min: float, dino_max: float = math.inf) -> PairSet:
    """The reference: every pair i < j through pair_sims. O(N^2 d) in numpy; small N only."""
    clip, dino = check_rows(clip, dino, screened=False)
    i, j = np.triu_indices(len(clip), k=1)
    step = 1 << 18
    parts = [_recheck(clip, dino, i[s : s + step], j[s : s + step], clip_min, dino_max) for s in range(0, len(i), step)]
    return _pairset(*(np.concatenate(p) for p in zip(*parts))) if parts else PairSet(*_EMPTY)


def brute_force_across(
    clip_a: np.ndarray,
    dino_a: np.ndarray,
    clip_b: np.ndarray,
    dino_b: np.ndarray,
    clip_min: float,
    dino_max: float = math.inf,
) -> PairSet:
    """The reference across two collections: every pair (row i of A, row j of B) through pair_sims, in
    float64. O(nA nB d) in numpy; small inputs only."""
    (ca, da), (cb, db) = check_rows(clip_a, dino_a, screened=False), check_rows(clip_b, dino_b, screened=False)
    check_same_dims("clip", ca, cb)
    check_same_dims("dino", da, db)
    clip, dino = np.concatenate([ca, cb]), np.concatenate([da, db])
    i, j = (a.ravel() for a in np.meshgrid(np.arange(len(ca)), np.arange(len(ca), len(clip)), indexing="ij"))
    step = 1 << 18
    parts = [_recheck(clip, dino, i[s : s + step], j[s : s + step], clip_min, dino_max) for s in range(0, len(i), step)]
    pairs = merge(parts)
    return PairSet(pairs.i, pairs.j - len(ca), pairs.clip_sim, pairs.dino_sim)


def merge(found: list) -> PairSet:
    """One PairSet, sorted, from the (i, j, clip_sim, dino_sim) parts of blocks in any order."""
    return _pairset(*(np.concatenate(p) for p in zip(*found))) if found else PairSet(*_EMPTY)


def block_rows(block_size: int | None, device_type: str) -> int:
    if block_size is not None and block_size < 1:
        raise InputError(f"block size must be at least 1, got {block_size}")
    return -(-(block_size or _DEFAULT_BLOCK.get(device_type, 4096)) // ALIGN) * ALIGN


def find_pairs(
    clip: np.ndarray,
    dino: np.ndarray,
    clip_min: float,
    dino_max: float = math.inf,
    *,
    new_rows=None,
    device: str | None = None,
    block_size: int | None = None,
    max_candidates: int = 50_000_000,
    progress: bool = False,
    rotate: bool | None = None,
    stats: dict | None = None,
    workers: int | None = None,
    desc: str = "mining pairs",
    kernel: str | None = None,
) -> PairSet:
    """Every pair i < j with clip_sim >= clip_min and dino_sim <= dino_max (both inclusive), exactly.

    new_rows: row numbers (any order, repeats allowed) of the rows new since an earlier mine: then only
    the pairs with one or both rows among them, and only the blocks that touch them are computed (the
    quantised new rows are searched first: band.new_first), about K x N products for K new rows of N.
    device: "cpu", "cuda", "cuda:1", ... [default: cuda when available]. block_size: rows per block
    side, rounded up to a multiple of 64 [default: 8192 on CPU, 16384 on CUDA]. rotate: see fast_pass.
    workers: threads [default: torch.get_num_threads()]: for the checks and the quantisation, and on a
    CPU for the blocks, cut into chunks of rows that each thread takes through products, candidate
    search and re-check, torch single-threaded meanwhile (1: one block at a time in torch's threads,
    as on a GPU). Raises InputError when more than max_candidates pairs pass
    the fast CLIP pass. stats, when given, receives the margin, the candidate count and whether the
    rows were rotated, the blocks computed and the row pairs they cover (pairs_examined), and the
    products kernel (its name, the candidates' rates). desc: the progress bar's label. kernel: the
    products kernel (vhmine.mine.join.kernels.KERNELS) [default or "auto": the fastest exact one measured on
    this machine, calibrate.choose].
    """

    def layout(pool):
        rows = _checked(clip, dino, pool)
        n = len(rows[0])
        return rows, (Band(n, n) if new_rows is None else new_first(new_rows, n)), None

    def back(i, j, _):  # (the band's order can swap a pair's rows)
        return np.minimum(i, j), np.maximum(i, j)

    return _mine(
        layout,
        back,
        clip_min,
        dino_max,
        device=device,
        block_size=block_size,
        max_candidates=max_candidates,
        progress=progress,
        rotate=rotate,
        stats=stats,
        workers=workers,
        desc=desc,
        kernel=kernel,
    )


def find_new_pairs(
    clip: np.ndarray, dino: np.ndarray, new_rows, clip_min: float, dino_max: float = math.inf, **options
) -> PairSet:
    """The band: every pair i < j with one or both rows among `new_rows` (row numbers, any order, repeats
    allowed) and clip_sim >= clip_min and dino_sim <= dino_max, exactly: find_pairs(new_rows=new_rows), which
    computes only the blocks that touch the new rows. options: find_pairs' keywords."""
    return find_pairs(clip, dino, clip_min, dino_max, new_rows=new_rows, **options)


def find_pairs_across(
    clip_a: np.ndarray,
    dino_a: np.ndarray,
    clip_b: np.ndarray,
    dino_b: np.ndarray,
    clip_min: float,
    dino_max: float = math.inf,
    **options,
) -> PairSet:
    """Every pair (i, j) of row i of collection A and row j of B with clip_sim >= clip_min and dino_sim <=
    dino_max (both inclusive), exactly (pair_sims' values), sorted by (i, j): i is not below j here.
    The rows are laid out A, then B (a copy: band.Band's rectangle), quantised together, and only the
    blocks of A's rows against B's are computed. options: find_pairs' keywords but new_rows."""
    if "new_rows" in options:
        raise TypeError("find_pairs_across() takes no new_rows")

    def layout(pool):
        sides = []
        for side, (c, d) in (("A", (clip_a, dino_a)), ("B", (clip_b, dino_b))):
            try:
                sides.append(_checked(c, d, pool))
            except InputError as err:
                raise InputError(f"collection {side}: {err}") from None
        (ca, da, ca2, da2), (cb, db, cb2, db2) = sides
        check_same_dims("clip", ca, cb)
        check_same_dims("dino", da, db)
        na = len(ca)
        band = Band(na + len(cb), na, na) if len(cb) else Band(na, 0, 0)
        return (np.concatenate([ca, cb]), np.concatenate([da, db]), max(ca2, cb2), max(da2, db2)), band, na

    def back(i, j, na):
        return i, j - na

    return _mine(layout, back, clip_min, dino_max, **options)


def _mine(
    layout,
    back,
    clip_min,
    dino_max,
    *,
    device=None,
    block_size=None,
    max_candidates=50_000_000,
    progress=False,
    rotate=None,
    stats=None,
    workers=None,
    desc="mining pairs",
    kernel=None,
) -> PairSet:
    """find_pairs' and find_pairs_across' search. layout(pool) -> ((clip, dino, clip_n2, dino_n2), band,
    how): the checked rows, the band.Band of their pairs searched (its order: which rows are searched
    first); back(i, j, how): the found pairs' row numbers (as the band gives them) as the caller numbers them."""
    import torch
    from tqdm import tqdm

    from vhmine.config import resolve_device

    clip_min, dino_max = check_limits(clip_min, dino_max)  # NaN is named, not met as a bare ValueError later
    threads, torch_threads = max(1, workers or torch.get_num_threads()), torch.get_num_threads()
    pool = None
    if threads > 1:  # one pool for all of it, its threads' torch single-threaded (band.mine_in_threads)
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(
            threads, thread_name_prefix="vhmine-mine", initializer=torch.set_num_threads, initargs=(1,)
        )
    try:
        (clip, dino, clip_n2, dino_n2), band, how = layout(pool)
        clip_min, dino_max = float(clip_min), float(dino_max)
        n = len(clip)
        if n < 2 or not band.pairs():
            if stats is not None:
                stats.update(candidates=0, blocks=0, pairs_examined=0)
            return PairSet(*_EMPTY)
        block_rows(block_size, "cpu")  # a bad size is named before the device is looked at
        device = resolve_device(device or None)  # a bad name or absent CUDA says so, instead of torch's traceback
        choice = calibrate.choose(device, -(-clip.shape[1] // 8) * 8, kernel=kernel)
        log.info("%s", choice.line())
        fp = fast_pass(clip, clip_min, rotate, workers=pool, qmax=choice.kernel.levels(clip.shape[1]))
        block = min(block_rows(block_size, device.type), len(fp.q))
        q = torch.from_numpy(band.layout(fp.q)).to(device)
        blocks = band.tiles(block)

        def miner(**kw):
            return BlockMiner(
                clip,
                dino,
                clip_min,
                dino_max,
                fp.thresh,
                n,
                device=device,
                block=block,
                width=fp.q.shape[1],
                sure=fp.sure,
                norms=(clip_n2, dino_n2),
                kernel=choice.kernel,
                **kw,
            )

        # numpy's BLAS in one thread while find_pairs' own threads call it
        one_blas = kernels.blas_threads(1) if choice.name == "blas-f32" and pool is not None else nullcontext()
        with tqdm(total=len(blocks), desc=desc, unit="block", disable=not progress) as bar, one_blas:
            if device.type == "cpu" and pool is not None:
                found, total = mine_in_threads(miner, q, band, block, pool, max_candidates, clip_min, bar)
            else:
                found, total = mine_blocks(miner, q, band, block, max_candidates, clip_min, bar)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        torch.set_num_threads(torch_threads)  # (the pool's threads set theirs, and torch's own count, to 1)
    i, j, c, d = (np.concatenate(p) for p in zip(*found)) if found else _EMPTY
    pairs = _pairset(*back(i, j, how), c, d)
    log.debug("fast pass: margin %.4f, %d candidates, %d pairs", fp.margin, total, len(pairs))
    if stats is not None:
        stats.update(
            margin=fp.margin,
            candidates=total,
            rotated=fp.rotated,
            blocks=len(blocks),
            pairs_examined=band.pairs(),
            kernel=choice.record(),
            kernel_line=choice.line(),
        )
    return pairs


def assert_same_pairs(got: PairSet, want: PairSet, *, atol: float = 1e-9, across: bool = False) -> None:
    """Raise AssertionError unless got and want hold the same pairs (in any order) with sims within atol.
    across: pairs of two collections' rows (find_pairs_across), where i need not be below j."""
    n = 1 + max((int(a.max()) for a in (got.i, got.j, want.i, want.j) if len(a)), default=0)
    kg, kw = got.i.astype(np.int64) * n + got.j, want.i.astype(np.int64) * n + want.j
    for name, ps, k in (("got", got, kg), ("want", want, kw)):
        if len(np.unique(k)) != len(k):
            raise AssertionError(f"{name} holds duplicate pairs")
        if not across and np.any(ps.i >= ps.j):
            raise AssertionError(f"{name} holds a pair with i >= j")
    missing, extra = np.setdiff1d(kw, kg), np.setdiff1d(kg, kw)
    if len(missing) or len(extra):

        def show(keys, ps, k):
            rows = np.flatnonzero(np.isin(k, keys[:5]))
            return ", ".join(f"({ps.i[r]}, {ps.j[r]}) clip={ps.clip_sim[r]!r} dino={ps.dino_sim[r]!r}" for r in rows)

        raise AssertionError(
            f"{len(missing)} pairs missing, {len(extra)} extra ({len(got)} got, {len(want)} wanted)"
            + (f"; first missing: {show(missing, want, kw)}" if len(missing) else "")
            + (f"; first extra: {show(extra, got, kg)}" if len(extra) else "")
        )
    _, ag, aw = np.intersect1d(kg, kw, assume_unique=True, return_indices=True)
    for name in ("clip_sim", "dino_sim"):
        diff = np.abs(getattr(got, name)[ag] - getattr(want, name)[aw])
        if len(diff) and not diff.max() <= atol:
            r = int(np.argmax(diff))
            raise AssertionError(
                f"{name} of pair ({got.i[ag[r]]}, {got.j[ag[r]]}) differs by {diff[r]:.3g} > atol={atol:g}: "
                f"got {getattr(got, name)[ag[r]]!r}, want {getattr(want, name)[aw[r]]!r}"
            )
