"""Exact similarity join: every pair i < j with CLIP cosine >= clip_min and DINOv2 cosine <= dino_max.

`vhmine mine` (vhmine/mine/job.py) reads the rows of `clip.faiss` and `dino.faiss` (float32,
L2-normalised, row i = images.parquet row i), calls `find_pairs`, and ranks and writes the
PairSet it gets back; this module reads and writes no files. A similarity here is always the
float64 inner product of two stored float32 rows as `pair_sims` computes it, and the result equals
`brute_force_pairs` exactly as a set, pairs at either threshold included. `assert_same_pairs` is
the order-insensitive comparator that the tests and scripts/bench_mine.py use.

How: CLIP rows are quantised to small integers once (fast_pass; first turned by a seeded random
rotation when a few dimensions dwarf the rest, as in real CLIP embeddings: inner products stay the
same, the quantisation step shrinks), and blocked upper-triangle products of those (BlockMiner;
torch, so the same code runs on a GPU) select candidates with a margin that provably covers the
quantisation and rotation error, without ever holding an N x N matrix. Only candidates get the
float64 CLIP and DINOv2 products. vhmine.mine.ray_engine runs the same BlockMiner, one Ray task per block.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass

import numpy as np

from vhmine.errors import InputError

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


@functools.lru_cache(maxsize=4)
def rotation(d: int, seed: int = 0) -> np.ndarray:
    """A random orthogonal d x d matrix in float32 (QR of a seeded Gaussian). Exactness never rests on
    it being orthogonal: _quantise measures how far it is from that and widens the margin to match."""
    qm, rm = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    m = (qm * np.sign(np.diag(rm))).astype(np.float32)
    m.flags.writeable = False
    return m


def _quantise(x: np.ndarray, qmax: int, rows: int, m: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """Rows z (z = m x when a rotation m is given, else x) as integers q in [-qmax, qmax], z ~ scale * q
    (zero-padded to `rows` x a multiple of 8, which changes no product), plus a bound on the error of
    any product against the original rows.

    With u = m x exactly: x.y - xh.yh = u.(v - yh) + (u - xh).yh - x.(m^T m - I)y. By Cauchy-Schwarz
    |x.y - scale^2 q_x.q_y| <= R (max|u| + max|xh|) + E max|x|^2, with E = ||m^T m - I||_F (measured;
    0 without m), |u| <= sqrt(1 + E)|x|, and R the largest |u - xh| <= |z - xh| + |u - z|. z is m x in
    float32, so |u - z| <= gamma_d sqrt(d) max_k |m_k| |x| (gamma_d = d 2^-24 / (1 - d 2^-24): a float32
    dot product's worst case in any summation order). The integer products are exact, so this bound,
    measured here in float64, is the fast pass's whole error.
    """
    n, d = x.shape
    gamma = orth = 0.0
    z = x
    if m is not None:
        m64 = m.astype(np.float64)
        orth = float(np.linalg.norm(m64.T @ m64 - np.eye(d))) + 1e-12  # + the float64 sum's own rounding
        gamma = d * 2.0**-24 / (1 - d * 2.0**-24) * math.sqrt(d) * float(np.linalg.norm(m64, axis=1).max())
        z = np.empty_like(x)  # all of it first: the scale follows the largest rotated component
        for s in range(0, n, 4096):
            np.matmul(x[s:s + 4096], m.T, out=z[s:s + 4096])
    amax = float(max(-z.min(), z.max()))
    scale = amax / qmax if amax > 0 else 1.0
    q = np.zeros((rows, -(-d // 8) * 8), np.int8)
    r2 = xn2 = xh2 = 0.0
    for s in range(0, n, 512):  # numpy, in chunks that stay in cache: no thread-pool stalls on a busy machine
        x64 = x[s:s + 512].astype(np.float64)
        xn2 = max(xn2, np.einsum("ij,ij->i", x64, x64).max())
        z64 = x64 if m is None else z[s:s + 512].astype(np.float64)
        qs = np.clip(np.rint(z64 * (1 / scale)), -qmax, qmax)
        q[s:s + len(qs), :d] = qs
        xh2 = max(xh2, np.einsum("ij,ij->i", qs, qs).max() * scale**2)
        z64 -= qs * scale
        r2 = max(r2, np.einsum("ij,ij->i", z64, z64).max())
    r = math.sqrt(r2) + gamma * math.sqrt(xn2)
    return q, scale, r * (math.sqrt(xn2 * (1 + orth)) + math.sqrt(xh2)) + orth * xn2


@dataclass(frozen=True, eq=False)
class FastPass:
    """What every block of the fast CLIP pass reads: n int8 rows (zero-padded to a multiple of 64) and
    the integer threshold that every pair with float64 CLIP sim >= clip_min provably reaches."""

    q: np.ndarray
    thresh: int
    margin: float  # bound on |float64 sim - scale^2 * integer product|
    rotated: bool
    n: int


def fast_pass(clip: np.ndarray, clip_min: float, rotate: bool | None = None) -> FastPass:
    """Quantise the (checked) CLIP rows once. rotate: turn them by a seeded random orthogonal matrix
    first [default: when that shrinks the quantisation step 1.5x or more, as with embeddings whose few
    dimensions are far larger than the rest: it spreads them over all dimensions]."""
    n, d = clip.shape
    # Quantisation levels: qmax^2 * d below 2**24 keeps the float32 fallback exact as well as int32.
    qmax = min(127, math.isqrt((2**24 - 1) // max(d, 1)))
    if rotate is None:  # judged on an even sample of rows: a rotation costs a d x d product per row
        sample = clip[np.linspace(0, n - 1, min(n, 4096)).astype(np.int64)]
        rotate = n > 0 and 1.5 * float(np.abs(sample @ rotation(d).T).max()) <= float(np.abs(clip).max())
    q, scale, err = _quantise(clip, qmax, -(-n // _ALIGN) * _ALIGN, rotation(d) if rotate else None)
    # A pair with float64 sim >= clip_min has real sim >= clip_min - d * 2**-53 (the float64 sum's own
    # rounding) and so integer product >= (clip_min - err - that) / scale^2; 1e-9 covers the d * 2**-53
    # term (1e-13 at d = 768) and the rounding of the norms behind err with room to spare.
    limit = d * qmax * qmax + 1  # |q_x.q_y| never exceeds this; clamping also keeps +-inf thresholds finite
    thresh = math.floor(min(max((clip_min - err - 1e-9) / scale**2, -limit), limit))
    return FastPass(q, thresh, err, bool(rotate), n)


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
    return _float_matmul(torch), torch.float32


def _float_matmul(torch):
    return lambda a, b, out: torch.mm(a.float(), b.float().T, out=out)


def tiles(rows: int, block: int) -> list[tuple[int, int]]:
    """First rows of the (row block, column block) pairs of the upper triangle, column block >= row block."""
    starts = range(0, rows, block)
    return [(r, c) for r in starts for c in starts if c >= r]


def block_bytes(block: int, width: int) -> int:
    """Working memory of one block besides its candidates: the product (4 bytes a cell), the segment
    maxima and their mask, and a copy of both row blocks."""
    return math.ceil(4.25 * block * block) + 2 * block * width


class BlockMiner:
    """One block of the upper triangle on one device: the products of two row blocks, the pairs at or
    above the threshold (candidates), and their exact float64 re-check. find_pairs runs every block in
    one process and vhmine.mine.ray_engine one per Ray task, through this same code.

    products="int8": rows are FastPass.q rows, thresh its integer threshold (exact integer matmul).
    products="float32": rows are float32 vectors and thresh a float one (the benchmark's baseline).
    """

    def __init__(self, clip, dino, clip_min, dino_max, thresh, n, *, device, block, width, products="int8"):
        import torch

        self.torch, self.device, self.thresh, self.n = torch, device, thresh, n
        self.clip, self.dino, self.clip_min, self.dino_max = clip, dino, clip_min, dino_max
        if products == "int8":
            self.matmul, dtype = _int_matmul(torch, device, width)
        else:
            self.matmul, dtype = _float_matmul(torch), torch.float32
        self.buf = torch.empty(block * block, dtype=dtype, device=device)  # reused: no page faults per block

    def candidates(self, x, y, r: int, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (i, j), i < j < n, of rows r + row of x and c + row of y whose product reaches thresh."""
        torch = self.torch
        seg = self.matmul(x, y, self.buf[:len(x) * len(y)].view(len(x), len(y))).view(len(x), -1, _SEG)
        # Two levels: segment maxima read the block once on the device, and only segments holding a
        # candidate come back to be compared element-wise (a block-wide compare + nonzero costs half
        # the int8 matmul on CPU). The small index work is numpy's: no thread-pool stalls.
        si, sk = np.nonzero(seg.amax(2).cpu().numpy() >= self.thresh)
        hits = seg[torch.from_numpy(si).to(self.device), torch.from_numpy(sk).to(self.device)].cpu().numpy()
        k, off = np.nonzero(hits >= self.thresh)
        i, j = si[k] + r, sk[k] * _SEG + off + c
        keep = (i < j) & (j < self.n)  # upper triangle only on the diagonal block; padding rows out
        return i[keep], j[keep]

    def recheck(self, i, j):
        return _recheck(self.clip, self.dino, i, j, self.clip_min, self.dino_max)


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
    desc: str = "mining pairs",
) -> PairSet:
    """Every pair i < j with clip_sim >= clip_min and dino_sim <= dino_max (both inclusive), exactly.

    device: "cpu", "cuda", "cuda:1", ... [default: cuda when available]. block_size: rows per block
    side, rounded up to a multiple of 64 [default: 8192 on CPU, 16384 on CUDA]. rotate: see fast_pass.
    Raises InputError when more than max_candidates pairs pass the fast CLIP pass. stats, when given,
    receives the margin, the candidate count and whether the rows were rotated. desc: the progress bar's label.
    """
    import torch
    from tqdm import tqdm

    from vhmine.embed.encoders import resolve_device

    clip, dino = _check(clip, dino)
    clip_min, dino_max = float(clip_min), float(dino_max)
    n = len(clip)
    if n < 2:
        return PairSet(*_EMPTY)
    block_rows(block_size, "cpu")  # a bad size is named before the device is looked at
    device = resolve_device(device or None)  # a bad name or absent CUDA says so, instead of torch's traceback
    fp = fast_pass(clip, clip_min, rotate)
    block = min(block_rows(block_size, device.type), len(fp.q))
    miner = BlockMiner(clip, dino, clip_min, dino_max, fp.thresh, n, device=device, block=block, width=fp.q.shape[1])
    q = torch.from_numpy(fp.q).to(device)
    blocks = tiles(len(fp.q), block)
    found, total = [], 0
    with torch.inference_mode():
        for b, (r, c) in enumerate(tqdm(blocks, desc=desc, unit="block", disable=not progress)):
            i, j = miner.candidates(q[r:r + block], q[c:c + block], r, c)
            total += len(i)
            if total > max_candidates:
                raise too_many_candidates(total, clip_min, b + 1, len(blocks), max_candidates)
            if len(i):
                found.append(miner.recheck(i, j))
    pairs = merge(found)
    log.debug("fast pass: margin %.4f, %d candidates, %d pairs", fp.margin, total, len(pairs))
    if stats is not None:
        stats.update(margin=fp.margin, candidates=total, rotated=fp.rotated, blocks=len(blocks))
    return pairs


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
