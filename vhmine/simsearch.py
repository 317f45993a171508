"""Exact similarity join: every pair i < j with CLIP cosine >= clip_min and DINOv2 cosine <= dino_max.

`vhmine mine` (vhmine/mine.py) reads the rows of `clip.faiss` and `dino.faiss` (float32,
L2-normalised, row i = images.parquet row i), calls `find_pairs`, and ranks and writes the
PairSet it gets back; this module reads and writes no files. A similarity here is always the
float64 inner product of two stored float32 rows as `pair_sims` computes it, and the result equals
`brute_force_pairs` exactly as a set, pairs at either threshold included. `assert_same_pairs` is
the order-insensitive comparator that the tests and scripts/bench_mine.py use.

How: CLIP rows are quantised to small integers once, and blocked upper-triangle products of those
(torch, so the same code runs on a GPU) select candidates with a margin that provably covers the
quantisation error, without ever holding an N x N matrix. Only candidates get the float64 CLIP and
DINOv2 products.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

from .errors import InputError

log = logging.getLogger(__name__)

_DEFAULT_BLOCK = {"cpu": 8192, "cuda": 16384}
_ALIGN = 64  # rows padded and blocks rounded to this: int8 GEMMs want rows > 16 and multiples of 8
_SEG = 64  # columns per segment in the two-level candidate search; divides _ALIGN
_CHUNK = 1024  # pairs per float64 batch in pair_sims: small enough to stay in cache


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


def pair_sims(x: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Float64 inner products of rows x[i] and x[j].

    float32 x float32 products are exact in float64, so only the summation rounds, and each row is
    summed (numpy's pairwise sum along a contiguous row) in an order that does not depend on the other
    pairs in the batch: the same pair gives the same bits in find_pairs, brute_force_pairs and the
    benchmark's baseline, so a threshold set to a pair's similarity finds that pair.
    """
    out = np.empty(len(i))
    for s in range(0, len(i), _CHUNK):
        a = x[i[s:s + _CHUNK]].astype(np.float64)
        np.multiply(a, x[j[s:s + _CHUNK]], out=a)
        out[s:s + _CHUNK] = a.sum(axis=1)
    return out


def _check(clip: np.ndarray, dino: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    clip, dino = np.ascontiguousarray(clip), np.ascontiguousarray(dino)
    for name, x in (("clip", clip), ("dino", dino)):
        if x.ndim != 2 or x.dtype != np.float32:
            raise InputError(f"{name} vectors must be a 2-D float32 array, got {x.dtype} with shape {x.shape}")
        bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
        if len(bad):
            raise InputError(
                f"{name} row {bad[0]} has NaN or infinite values ({len(bad)} rows in all); "
                "re-run `vhmine embed` for those images"
            )
    if len(clip) != len(dino):
        raise InputError(
            f"clip has {len(clip)} rows but dino has {len(dino)}; the two indexes must be row-aligned "
            "(re-run `vhmine embed`)"
        )
    return clip, dino


def _recheck(clip, dino, i, j, clip_min, dino_max):
    """Exact float64 filter of candidate pairs; DINOv2 is computed only for those that pass CLIP."""
    c = pair_sims(clip, i, j)
    keep = c >= clip_min
    i, j, c = i[keep], j[keep], c[keep]
    d = pair_sims(dino, i, j)
    keep = d <= dino_max
    return i[keep], j[keep], c[keep], d[keep]


def brute_force_pairs(clip: np.ndarray, dino: np.ndarray, clip_min: float, dino_max: float = math.inf) -> PairSet:
    """The reference: every pair i < j through pair_sims. O(N^2 d) in numpy; small N only."""
    clip, dino = _check(clip, dino)
    i, j = np.triu_indices(len(clip), k=1)
    step = 1 << 18
    parts = [_recheck(clip, dino, i[s:s + step], j[s:s + step], clip_min, dino_max) for s in range(0, len(i), step)]
    return _pairset(*(np.concatenate(p) for p in zip(*parts))) if parts else PairSet(*_EMPTY)


def _quantise(x: np.ndarray, qmax: int, rows: int) -> tuple[np.ndarray, float, float]:
    """Rows as integers q in [-qmax, qmax], x ~ scale * q (zero-padded to `rows` x a multiple of 8,
    which changes no product), plus a bound on the error of any product.

    For rows x, y with xh = scale * q_x: x.y - xh.yh = x.(y - yh) + (x - xh).yh, so by Cauchy-Schwarz
    |x.y - scale^2 q_x.q_y| <= R (max|x| + max|xh|) with R the largest residual norm |x - xh|. The
    integer products are exact, so this bound, measured here in float64, is the fast pass's whole error.
    """
    n, d = x.shape
    amax = float(max(-x.min(), x.max()))
    scale = amax / qmax if amax > 0 else 1.0
    q = np.zeros((rows, -(-d // 8) * 8), np.int8)
    r2 = xn2 = xh2 = 0.0
    for s in range(0, n, 512):  # numpy, in chunks that stay in cache: no thread-pool stalls on a busy machine
        x64 = x[s:s + 512].astype(np.float64)
        qs = np.clip(np.rint(x64 * (1 / scale)), -qmax, qmax)
        q[s:s + len(qs), :d] = qs
        xn2 = max(xn2, np.einsum("ij,ij->i", x64, x64).max())
        xh2 = max(xh2, np.einsum("ij,ij->i", qs, qs).max() * scale**2)
        x64 -= qs * scale
        r2 = max(r2, np.einsum("ij,ij->i", x64, x64).max())
    return q, scale, math.sqrt(r2) * (math.sqrt(xn2) + math.sqrt(xh2))


def _int_matmul(torch, device, d: int):
    """An exact integer matmul (a @ b.T into out) on `device` and its output dtype: torch._int_mm where
    it is present and checks out, else float32 matmul, which is exact here too (every operand and
    partial sum is an integer below 2**24, so TF32 or bf16-input modes cannot round them either).

    Why int8: on a 2-core AVX512-VNNI CPU, _int_mm ran about 2x a bf16 matmul and 5x float32, and
    being exact it leaves the quantisation error as the only error to bound.
    """
    p = np.random.default_rng(0).integers(-127, 128, (_ALIGN, d))
    p[0], p[1] = 127, -127  # all-extreme rows catch kernels that saturate 16-bit intermediates
    probe = torch.from_numpy(p.astype(np.int8)).to(device)
    try:
        if np.array_equal(torch._int_mm(probe, probe.T).cpu().numpy(), p @ p.T):
            return (lambda a, b, out: torch._int_mm(a, b.T, out=out)), torch.int32
    except (RuntimeError, AttributeError, NotImplementedError):
        pass
    return (lambda a, b, out: torch.mm(a.float(), b.float().T, out=out)), torch.float32


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
) -> PairSet:
    """Every pair i < j with clip_sim >= clip_min and dino_sim <= dino_max (both inclusive), exactly.

    device: "cpu", "cuda", "cuda:1", ... [default: cuda when available]. block_size: rows per block
    side, rounded up to a multiple of 64 [default: 8192 on CPU, 16384 on CUDA]. Raises InputError when
    more than max_candidates pairs pass the fast CLIP pass.
    """
    import torch
    from tqdm import tqdm

    clip, dino = _check(clip, dino)
    clip_min, dino_max = float(clip_min), float(dino_max)
    n, d = clip.shape
    if n < 2:
        return PairSet(*_EMPTY)
    if block_size is not None and block_size < 1:
        raise InputError(f"block size must be at least 1, got {block_size}")
    from .encoders import resolve_device

    device = resolve_device(device or None)  # a bad name or absent CUDA says so, instead of torch's traceback
    block = -(-(block_size or _DEFAULT_BLOCK.get(device.type, 4096)) // _ALIGN) * _ALIGN

    # Quantisation levels: qmax^2 * d below 2**24 keeps the float32 fallback exact as well as int32.
    qmax = min(127, math.isqrt((2**24 - 1) // max(d, 1)))
    rows = -(-n // _ALIGN) * _ALIGN
    q, scale, err = _quantise(clip, qmax, rows)
    # A pair with float64 sim >= clip_min has real sim >= clip_min - d * 2**-53 (the float64 sum's own
    # rounding) and so integer product >= (clip_min - err - that) / scale^2; 1e-9 covers the d * 2**-53
    # term (1e-13 at d = 768) and the rounding of the norms behind err with room to spare.
    limit = d * qmax * qmax + 1  # |q_x.q_y| never exceeds this; clamping also keeps +-inf thresholds finite
    thresh = math.floor(min(max((clip_min - err - 1e-9) / scale**2, -limit), limit))
    q = torch.from_numpy(q).to(device)
    matmul, out_dtype = _int_matmul(torch, device, q.shape[1])
    buf = torch.empty(min(block, rows) ** 2, dtype=out_dtype, device=device)  # reused: no page faults per block

    starts = range(0, rows, block)
    blocks = [(r, c) for r in starts for c in starts if c >= r]
    found, total = [], 0
    with torch.inference_mode():
        for b, (r, c) in enumerate(tqdm(blocks, desc="mining pairs", unit="block", disable=not progress)):
            x, y = q[r:r + block], q[c:c + block]
            seg = matmul(x, y, buf[:len(x) * len(y)].view(len(x), len(y))).view(len(x), -1, _SEG)
            # Two levels: segment maxima read the block once on the device, and only segments holding a
            # candidate come back to be compared element-wise (a block-wide compare + nonzero costs half
            # the int8 matmul on CPU). The small index work is numpy's: no thread-pool stalls.
            si, sk = np.nonzero(seg.amax(2).cpu().numpy() >= thresh)
            hits = seg[torch.from_numpy(si).to(device), torch.from_numpy(sk).to(device)].cpu().numpy()
            k, off = np.nonzero(hits >= thresh)
            i, j = si[k] + r, sk[k] * _SEG + off + c
            keep = (i < j) & (j < n)  # upper triangle only on the diagonal block; padding rows out
            i, j = i[keep], j[keep]
            total += len(i)
            if total > max_candidates:
                raise InputError(
                    f"{total:,} pairs already have CLIP cosine near or above {clip_min:g} after {b + 1} of "
                    f"{len(blocks)} blocks, more than the limit of {max_candidates:,} candidates; "
                    f"raise --clip above {clip_min:g} so that fewer pairs qualify"
                )
            if len(i):
                found.append(_recheck(clip, dino, i, j, clip_min, dino_max))
    log.debug("fast pass: margin %.4f, %d candidates, %d pairs", err, total, sum(len(f[0]) for f in found))
    return _pairset(*(np.concatenate(p) for p in zip(*found))) if found else PairSet(*_EMPTY)


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
