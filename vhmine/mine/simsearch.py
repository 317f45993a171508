"""Exact similarity join: every pair i < j with CLIP cosine >= clip_min and DINOv2 cosine <= dino_max.

`vhmine mine` (vhmine/mine/job.py) reads the rows of `clip.faiss` and `dino.faiss` (float32,
L2-normalised, row i = images.parquet row i), calls `find_pairs`, and ranks and writes the
PairSet it gets back; this module reads and writes no files. A similarity here is always the
float64 inner product of two stored float32 rows as `pair_sims` computes it, and the result equals
`brute_force_pairs` exactly as a set, pairs at either threshold included. `assert_same_pairs` is
the order-insensitive comparator that the tests and scripts/bench_mine.py use.

How: CLIP rows are quantised to small integers once (quantise.fast_pass; first turned by an orthogonal map,
Spread, when a few dimensions dwarf the rest, as in real CLIP embeddings: inner products stay the
same, the quantisation step shrinks), and blocked upper-triangle products of those (products.BlockMiner,
with the exact products kernel measured fastest on this machine: kernels, calibrate; torch, so the same code runs
on a GPU) select candidates with a margin that provably covers the
quantisation and turning error, without ever holding an N x N matrix. Only candidates are re-checked:
(recheck) float32 products with a proven error bound decide the pairs clear of a threshold, float64 ones
(pair_sims) the rest and every pair returned. On a CPU, find_pairs' threads each take chunks of rows
of a block through products, search and re-check, in cache-sized pieces. vhmine.mine.ray_engine runs the
same BlockMiner, one Ray task per tile.
"""

from __future__ import annotations

import logging
import math
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from vhmine.errors import InputError
from vhmine.mine import calibrate, kernels
from vhmine.mine.products import BlockMiner, tiles
from vhmine.mine.quantise import _ALIGN, _in_threads, fast_pass
from vhmine.mine.recheck import _U32, _gamma, _recheck, pair_sims
from vhmine.mine.rowcheck import check_limits, check_norms

__all__ = ["PairSet", "assert_same_pairs", "brute_force_pairs", "fast_pass", "find_pairs", "merge", "pair_sims"]

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


def _check(clip: np.ndarray, dino: np.ndarray, *, screened: bool = True) -> tuple[np.ndarray, np.ndarray]:
    return _checked(clip, dino, screened=screened)[:2]


def _checked(clip: np.ndarray, dino: np.ndarray, workers=1, *, screened: bool = True
             ) -> tuple[np.ndarray, np.ndarray, float, float]:
    """_check, plus a bound on the largest squared row norm of each (workers: see _in_threads). screened:
    rows are refused whose norms float32 screening cannot handle (rowcheck; float64 alone handles any)."""
    clip, dino = np.ascontiguousarray(clip), np.ascontiguousarray(dino)
    norms = []
    for name, x in (("clip", clip), ("dino", dino)):
        if x.ndim != 2 or x.dtype != np.float32:
            raise InputError(f"{name} vectors must be a 2-D float32 array, got {x.dtype} with shape {x.shape}")
        # one read of the rows: a NaN or infinite value makes its row's sum of squares NaN or infinite;
        # the rows flagged so (also finite rows whose squares overflow) are then looked at value by value
        n2 = np.concatenate([np.empty(0, np.float32)] + _in_threads(
            lambda s: np.einsum("ij,ij->i", x[s:s + 8192], x[s:s + 8192]), range(0, len(x), 8192), workers))
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
    clip, dino = _check(clip, dino, screened=False)
    i, j = np.triu_indices(len(clip), k=1)
    step = 1 << 18
    parts = [_recheck(clip, dino, i[s:s + step], j[s:s + step], clip_min, dino_max) for s in range(0, len(i), step)]
    return _pairset(*(np.concatenate(p) for p in zip(*parts))) if parts else PairSet(*_EMPTY)


def too_many_candidates(total: int, clip_min: float, done: int, blocks: int, limit: int) -> InputError:
    return InputError(
        f"{total:,} pairs already have CLIP cosine near or above {clip_min:g} after {done} of "
        f"{blocks} blocks, more than the limit of {limit:,} candidates; "
        f"raise --clip above {clip_min:g} so that fewer pairs qualify"
    )


def merge(found: list) -> PairSet:
    """One PairSet, sorted, from the (i, j, clip_sim, dino_sim) parts of blocks in any order."""
    return _pairset(*(np.concatenate(p) for p in zip(*found))) if found else PairSet(*_EMPTY)


def block_rows(block_size: int | None, device_type: str) -> int:
    if block_size is not None and block_size < 1:
        raise InputError(f"block size must be at least 1, got {block_size}")
    return -(-(block_size or _DEFAULT_BLOCK.get(device_type, 4096)) // _ALIGN) * _ALIGN


def find_pairs(
    clip: np.ndarray,
    dino: np.ndarray,
    clip_min: float,
    dino_max: float = math.inf,
    *,
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

    device: "cpu", "cuda", "cuda:1", ... [default: cuda when available]. block_size: rows per block
    side, rounded up to a multiple of 64 [default: 8192 on CPU, 16384 on CUDA]. rotate: see fast_pass.
    workers: threads [default: torch.get_num_threads()]: for the checks and the quantisation, and on a
    CPU for the blocks, cut into chunks of rows that each thread takes through products, candidate
    search and re-check, torch single-threaded meanwhile (1: one block at a time in torch's threads,
    as on a GPU). Raises InputError when more than max_candidates pairs pass
    the fast CLIP pass. stats, when given, receives the margin, the candidate count and whether the
    rows were rotated, and the products kernel (its name, the candidates' rates). desc: the progress
    bar's label. kernel: the products kernel (vhmine.mine.kernels.KERNELS) [default or "auto": the
    fastest exact one measured on this machine, calibrate.choose].
    """
    import torch
    from tqdm import tqdm

    from vhmine.embed.encoders import resolve_device

    clip_min, dino_max = check_limits(clip_min, dino_max)  # NaN is named, not met as a bare ValueError later
    threads, torch_threads = max(1, workers or torch.get_num_threads()), torch.get_num_threads()
    pool = None
    if threads > 1:  # one pool for all of it, its threads' torch single-threaded (_mine_in_threads)
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(threads, thread_name_prefix="vhmine-mine", initializer=torch.set_num_threads,
                                  initargs=(1,))
    try:
        clip, dino, clip_n2, dino_n2 = _checked(clip, dino, pool)
        clip_min, dino_max = float(clip_min), float(dino_max)
        n = len(clip)
        if n < 2:
            return PairSet(*_EMPTY)
        block_rows(block_size, "cpu")  # a bad size is named before the device is looked at
        device = resolve_device(device or None)  # a bad name or absent CUDA says so, instead of torch's traceback
        choice = calibrate.choose(device, -(-clip.shape[1] // 8) * 8, kernel=kernel)
        log.info("%s", choice.line())
        fp = fast_pass(clip, clip_min, rotate, workers=pool, qmax=choice.kernel.levels(clip.shape[1]))
        block = min(block_rows(block_size, device.type), len(fp.q))
        q = torch.from_numpy(fp.q).to(device)
        blocks = tiles(len(fp.q), block)

        def miner(**kw):
            return BlockMiner(clip, dino, clip_min, dino_max, fp.thresh, n, device=device, block=block,
                              width=fp.q.shape[1], sure=fp.sure, norms=(clip_n2, dino_n2), kernel=choice.kernel, **kw)

        # numpy's BLAS in one thread while find_pairs' own threads call it
        one_blas = kernels.blas_threads(1) if choice.name == "blas-f32" and pool is not None else nullcontext()
        with tqdm(total=len(blocks), desc=desc, unit="block", disable=not progress) as bar, one_blas:
            if device.type == "cpu" and pool is not None:
                found, total = _mine_in_threads(miner, q, blocks, block, pool, max_candidates, clip_min, bar)
            else:
                found, total, m = [], 0, miner()
                with torch.inference_mode():
                    for b, (r, c) in enumerate(blocks):
                        i, j, p = m.search(q[r:r + block], q[c:c + block], r, c)
                        total += len(i)
                        if total > max_candidates:
                            raise too_many_candidates(total, clip_min, b + 1, len(blocks), max_candidates)
                        if len(i):
                            found.append(m.recheck(i, j, p))
                        bar.update()
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        torch.set_num_threads(torch_threads)  # (the pool's threads set theirs, and torch's own count, to 1)
    pairs = merge(found)
    log.debug("fast pass: margin %.4f, %d candidates, %d pairs", fp.margin, total, len(pairs))
    if stats is not None:
        stats.update(margin=fp.margin, candidates=total, rotated=fp.rotated, blocks=len(blocks),
                     kernel=choice.record(), kernel_line=choice.line())
    return pairs


_UNIT_ROWS = 2048  # rows of a block that one thread takes through products, search and re-check at a time


def _mine_in_threads(miner, q, blocks, block, pool, max_candidates, clip_min, bar):
    """find_pairs' blocks on a CPU, as chunks of rows that the pool's threads (torch single-threaded in
    each) take in turn, each through its own BlockMiner: each thread's products, search and (numpy)
    re-check run on one core, so no core waits for another (a thread pool's barriers stall when a busy
    machine takes a core away), and the numpy work of one chunk runs beside the products of another."""
    import threading
    from concurrent.futures import as_completed

    import torch

    local, lock, seen = threading.local(), threading.Lock(), [0]

    def unit(r, c, s):
        if not hasattr(local, "miner"):
            local.miner = miner(span=_UNIT_ROWS)
        with torch.inference_mode():
            i, j, p = local.miner.search(q[r + s:min(r + s + _UNIT_ROWS, r + block)], q[c:c + block], r + s, c)
        with lock:
            seen[0] += len(i)
            over = seen[0] > max_candidates  # then no re-check: the job stops
        return len(i), (local.miner.recheck(i, j, p) if len(i) and not over else None)

    units = [(b, r, c, s) for b, (r, c) in enumerate(blocks) for s in range(0, min(block, len(q) - r), _UNIT_ROWS)]
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


def assert_same_pairs(got: PairSet, want: PairSet, *, atol: float = 1e-9) -> None:
    """Raise AssertionError unless got and want hold the same pairs (in any order) with sims within atol."""
    n = 1 + max((int(a.max()) for a in (got.i, got.j, want.i, want.j) if len(a)), default=0)
    kg, kw = got.i.astype(np.int64) * n + got.j, want.i.astype(np.int64) * n + want.j
    for name, ps, k in (("got", got, kg), ("want", want, kw)):
        if len(np.unique(k)) != len(k):
            raise AssertionError(f"{name} holds duplicate pairs")
        if np.any(ps.i >= ps.j):
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
