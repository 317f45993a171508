"""Exact similarity join: every pair i < j with CLIP cosine >= clip_min and DINOv2 cosine <= dino_max.

`vhmine mine` (vhmine/mine/local_run.py) reads the rows of `clip.faiss` and `dino.faiss` (float32,
L2-normalised, row i = images.parquet row i), calls `find_pairs`, and ranks and writes the
PairSet it gets back; this module reads and writes no files. A similarity here is always the
float64 inner product of two stored float32 rows as `pair_sims` computes it, and the result equals
`brute_force_pairs` exactly as a set, pairs at either threshold included. find_pairs(new_rows=...)
mines only the pairs that touch an index's new rows (an earlier mine of the other rows plus these is a
full mine, bit for bit), and find_pairs_across the pairs of one collection's rows with another's
(`brute_force_across` its reference); vhmine.mine.join.search builds each shape's parts (band.Part) and
runs just their blocks.
`assert_same_pairs` is the order-insensitive comparator that the tests and scripts/bench_mine.py use.

How: CLIP rows are quantised to small integers once (quantise.fast_pass; first turned by an orthogonal map,
Spread, when a few dimensions dwarf the rest, as in real CLIP embeddings: inner products stay the
same, the quantisation step shrinks), and blocked upper-triangle products of those (products.BlockMiner,
with the exact products kernel measured fastest on this machine: kernels, calibrate; torch, so the same code runs
on a GPU) select candidates with a margin that provably covers the
quantisation and turning error, without ever holding an N x N matrix. Only candidates are re-checked:
(recheck) float32 products with a proven error bound decide the pairs clear of a threshold, float64 ones
(pair_sims) the rest and every pair returned. On a CPU, find_pairs' threads each take chunks of rows
of a block through products and search, in cache-sized pieces, and batches of candidates through the
re-check; pieces that provably hold no candidate can be left out (prune, chosen by measurement).
vhmine.mine.ray.engine runs the same BlockMiner, one Ray task per tile.
"""

from __future__ import annotations

import functools
import logging
import math

import numpy as np

from vhmine.errors import InputError
from vhmine.mine.join import search
from vhmine.mine.join.pairset import _EMPTY, PairSet, _pairset, merge, no_pairs
from vhmine.mine.join.quantise import fast_pass
from vhmine.mine.join.recheck import _recheck, pair_sims
from vhmine.mine.join.rowcheck import (
    check_limits,
    check_rows,
    check_same_dims,
    new_rows_of,
    prepared,
    prepared_across,
)

__all__ = [
    "PairSet",
    "assert_same_pairs",
    "brute_force_across",
    "brute_force_pairs",
    "check_rows",
    "fast_pass",
    "find_new_pairs",
    "find_pairs",
    "find_pairs_across",
    "merge",
    "no_pairs",
    "pair_sims",
    "small_new_pairs",
    "small_pairs",
    "small_pairs_across",
]

log = logging.getLogger(__name__)


def brute_force_pairs(clip: np.ndarray, dino: np.ndarray, clip_min: float, dino_max: float = math.inf) -> PairSet:
    """The reference: every pair i < j through pair_sims. O(N^2 d) in numpy; small N only."""
    clip, dino = check_rows(clip, dino, screened=False)
    i, j = np.triu_indices(len(clip), k=1)
    step = 1 << 18
    parts = [_recheck(clip, dino, i[s : s + step], j[s : s + step], clip_min, dino_max) for s in range(0, len(i), step)]
    return _pairset(*(np.concatenate(p) for p in zip(*parts))) if parts else PairSet(*_EMPTY)


def small_pairs(clip: np.ndarray, dino: np.ndarray, clip_min: float, *, progress: bool = False) -> PairSet:
    """Every pair i < j with clip_sim >= clip_min of a small collection, all of them multiplied in numpy
    float64 (brute_force_pairs, the join's own definition: the pairs and their similarities are find_pairs',
    bit for bit) without loading torch, whose import alone takes longer than such a join. Refuses what
    find_pairs refuses (check_rows, check_limits). progress: a one-step bar, as find_pairs shows."""
    return _small("triangle", (clip, dino), clip_min, progress)


def small_new_pairs(
    clip: np.ndarray, dino: np.ndarray, new_rows, clip_min: float, *, progress: bool = False
) -> PairSet:
    """find_new_pairs' band of a small collection (every pair with one or both rows among new_rows and clip_sim
    >= clip_min), each pair multiplied in numpy float64 (pair_sims: find_new_pairs' pairs and similarities, bit
    for bit) without loading torch. Refuses what find_new_pairs refuses (check_rows, check_limits)."""
    return _small("band", (clip, dino), clip_min, progress, new_rows)


def small_pairs_across(
    clip_a: np.ndarray, dino_a: np.ndarray, clip_b: np.ndarray, dino_b: np.ndarray, clip_min: float, *, progress=False
) -> PairSet:
    """find_pairs_across' rectangle of two small collections, each pair multiplied in numpy float64
    (brute_force_across: the same pairs and similarities, bit for bit) without loading torch. Refuses what
    find_pairs_across refuses, in its words (check_rows per collection, check_limits, the dimensions)."""
    return _small("across", (clip_a, dino_a, clip_b, dino_b), clip_min, progress)


def _small(kind: str, rows: tuple, clip_min: float, progress: bool, new_rows=None) -> PairSet:
    """The small_* entries: the rows checked, the shape's pairs listed, each multiplied in float64 (recheck:
    pair_sims) and kept when clip_sim >= clip_min, sorted, under a one-step progress bar."""
    from tqdm import tqdm

    clip_min, _ = check_limits(clip_min, math.inf)
    if kind == "across":
        sides = []
        for side, (c, d) in (("A", rows[:2]), ("B", rows[2:])):
            try:
                sides.append(check_rows(c, d))
            except InputError as err:
                raise InputError(f"collection {side}: {err}") from None
        (ca, da), (cb, db) = sides
        check_same_dims("clip", ca, cb)
        check_same_dims("dino", da, db)
        clip, dino, na = np.concatenate([ca, cb]), np.concatenate([da, db]), len(ca)
        i, j = np.meshgrid(np.arange(na), np.arange(na, len(clip)), indexing="ij")
        i, j = i.ravel(), j.ravel()
    else:
        clip, dino = check_rows(*rows)
    if kind == "triangle":
        i, j = np.triu_indices(len(clip), k=1)
    elif kind == "band":  # the new rows against the others, and among themselves (never the whole triangle)
        new = new_rows_of(new_rows, len(clip))
        old = np.setdiff1d(np.arange(len(clip)), new)
        ii, jj = np.triu_indices(len(new), 1)
        i = np.concatenate([np.repeat(new, len(old)), new[ii]]).astype(np.int64)
        j = np.concatenate([np.tile(old, len(new)), new[jj]]).astype(np.int64)
        i, j = np.minimum(i, j), np.maximum(i, j)
    parts, step = [], 1 << 18
    with tqdm(total=1, desc="mining pairs", unit="block", disable=not progress) as bar:
        for s in range(0, len(i), step):
            parts.append(_recheck(clip, dino, i[s : s + step], j[s : s + step], clip_min, math.inf))
        bar.update(1)
    pairs = merge(parts)
    if kind == "across":  # (brute_force_across' numbers: j counts B's rows)
        return PairSet(pairs.i, pairs.j - na, pairs.clip_sim, pairs.dino_sim)
    return pairs


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


def find_pairs(
    clip: np.ndarray,
    dino: np.ndarray,
    clip_min: float,
    dino_max: float = math.inf,
    *,
    new_rows=None,
    quantised=None,
    device: str | None = None,
    block_size: int | None = None,
    max_candidates: int = 50_000_000,
    progress: bool = False,
    rotate: bool | None = None,
    prune: bool | None = None,
    stats: dict | None = None,
    workers: int | None = None,
    desc: str = "mining pairs",
    kernel: str | None = None,
) -> PairSet:
    """Every pair i < j with clip_sim >= clip_min and dino_sim <= dino_max (both inclusive), exactly.

    new_rows: row numbers (any order, repeats allowed) of the rows new since an earlier mine: then only
    the pairs with one or both rows among them, and only the blocks that touch them are computed: the new
    rows (quantised, gathered) against every row where it is, about K x N products for K new rows of N.
    quantised: with new_rows, the earlier mine's quantisation of the other rows (its stats["quantised"]:
    the rows not in new_rows, in order, as they are now), so only the new rows are quantised (with the same
    quantiser; the bound covers all of them) [default: every row is quantised again]. device: "cpu",
    "cuda", "cuda:1", ... [default: cuda when available]. block_size: rows per block side, rounded up to
    a multiple of 64 [default: 8192 on CPU, 16384 on CUDA]. rotate: see fast_pass. prune: skip the pieces
    of products that provably hold no candidate (vhmine.mine.join.prune) [default: when its measure on a
    sample of the rows says it pays; True: always (a full mine only); False: never]. workers: threads
    [default: torch.get_num_threads()]: for the checks and the quantisation, and on a CPU for the blocks, cut
    into chunks of rows that each thread takes through products and candidate search, and batches of
    candidates that each re-checks, torch single-threaded meanwhile (1: one block at a time in torch's
    threads, as on a GPU). Raises InputError when more than max_candidates pairs pass the fast CLIP
    pass. stats, when given, receives the margin, the candidate count and whether the rows were rotated,
    the blocks computed and the row pairs they cover (pairs_examined), the products kernel (its name, the
    candidates' rates), the pruning (prune: what was measured and chosen, prune_line) and `quantised`
    (the FastPass of every row in this order, for a later find_pairs(new_rows=..., quantised=...); None
    for a band from kept rows). desc: the progress bar's label. kernel: the products kernel
    (vhmine.mine.join.kernels.KERNELS) [default or "auto": the fastest exact one measured on this machine,
    calibrate.choose].
    """
    if quantised is not None and new_rows is None:
        raise TypeError("find_pairs(quantised=...) takes new_rows too: the kept rows are the others")

    found, _ = search.mine(
        functools.partial(prepared, clip, dino, new_rows, quantised),
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
        quantised=quantised,
        prune=prune,
    )
    i, j, c, d = (np.concatenate(p) for p in zip(*found)) if found else _EMPTY
    return _pairset(np.minimum(i, j), np.maximum(i, j), c, d)  # (a band's rows may come either way round)


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
    The rows are laid out A, then B (a copy), quantised together, and only the blocks of A's rows against
    B's are computed. options: find_pairs' keywords but new_rows and quantised."""
    for name in ("new_rows", "quantised"):
        if name in options:
            raise TypeError(f"find_pairs_across() takes no {name}")

    prepare = functools.partial(prepared_across, clip_a, dino_a, clip_b, dino_b)
    found, shape = search.mine(prepare, clip_min, dino_max, **options)
    i, j, c, d = (np.concatenate(p) for p in zip(*found)) if found else _EMPTY
    return _pairset(i, j - shape.na, c, d)


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
