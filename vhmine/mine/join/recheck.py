"""The exact re-check of candidate pairs: which of them really have CLIP cosine >= clip_min and DINOv2
cosine <= dino_max, and their float64 similarities. Reads the float32 rows it is given; writes nothing.

pair_sims is the one definition of a similarity in vhmine (find_pairs, brute_force_pairs, the Ray
tiles, the demo and the benchmarks all call it). _screened_recheck gives _recheck's result with float64
arithmetic only where it matters: float32 products, with a proven bound on their error, decide the
pairs clear of a threshold; pair_sims' float64 ones the rest and every similarity returned.
"""

from __future__ import annotations

import math

import numpy as np

from vhmine.mine.join.rowcheck import _U32, _U64, _gamma

_CHUNK = 256  # pairs per batch in pair_sims and _screen: small enough to stay in a core's cache


def _check_rows(x: np.ndarray, i: np.ndarray, j: np.ndarray) -> None:
    """Row numbers out of range raise, as numpy's indexing would (np.take below clips instead)."""
    for a in (i, j):
        if len(a) and not (0 <= a.min() and a.max() < len(x)):
            raise IndexError(f"row numbers must lie in [0, {len(x)}), got {a.min()} to {a.max()}")


def pair_sims(x: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Float64 inner products of rows x[i] and x[j].

    float32 x float32 products are exact in float64, so only the summation rounds, and each row is
    summed (numpy's pairwise sum along a contiguous row) in an order that does not depend on the other
    pairs in the batch: the same pair gives the same bits in find_pairs, brute_force_pairs and the
    benchmark's baseline, so a threshold set to a pair's similarity finds that pair.
    """
    out = np.empty(len(i))
    _check_rows(x, i, j)
    a64 = np.empty((min(_CHUNK, len(i)), x.shape[1]))  # (the same buffer each chunk: it stays in cache)
    for s, xi, xj in _copied_rows(x, i, j):
        m = len(xi)
        np.copyto(a64[:m], xi)
        np.multiply(a64[:m], xj, out=a64[:m])  # the exact element products (a float32 product fits in float64)
        np.add.reduce(a64[:m], axis=1, out=out[s : s + m])
    return out


def _copied_rows(x: np.ndarray, i: np.ndarray, j: np.ndarray):
    """(s, x[i], x[j]) for each chunk of _CHUNK pairs from s, the rows copied into two buffers reused chunk to
    chunk (they stay in cache); row numbers checked beforehand."""
    k = min(_CHUNK, len(i))
    a, b = np.empty((k, x.shape[1]), x.dtype), np.empty((k, x.shape[1]), x.dtype)
    for s in range(0, len(i), _CHUNK):
        m = len(i[s : s + _CHUNK])
        np.take(x, i[s : s + _CHUNK], axis=0, out=a[:m], mode="clip")  # (mode "raise" buffers out: slower)
        np.take(x, j[s : s + _CHUNK], axis=0, out=b[:m], mode="clip")
        yield s, a[:m], b[:m]


def _dots32(x: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Float32 products of rows x[i] and x[j] (checked row numbers), in some summation order."""
    v = np.empty(len(i), np.float32)
    for s, xi, xj in _copied_rows(x, i, j):
        np.einsum("ij,ij->i", xi, xj, out=v[s : s + len(xi)])
    return v


def _recheck(clip, dino, i, j, clip_min, dino_max):
    """Exact float64 filter of candidate pairs; DINOv2 is computed only for those that pass CLIP."""
    c = pair_sims(clip, i, j)
    keep = c >= clip_min
    i, j, c = i[keep], j[keep], c[keep]
    d = pair_sims(dino, i, j)
    keep = d <= dino_max
    return i[keep], j[keep], c[keep], d[keep]


def _screen_bound(x: np.ndarray, i: np.ndarray, j: np.ndarray, norm2: float | None = None) -> float:
    """A bound on |float32 product - pair_sims| for these pairs: both are within gamma_d sum_k |x_k y_k|
    <= gamma_d max |row|^2 of the exact product (float32 and float64 gamma), doubled. norm2: a bound
    on the largest squared norm of the rows [default: measured on the rows involved, a float32 sum
    raised by its own bound]."""
    d = x.shape[1]
    if norm2 is None:
        rows = np.unique(np.concatenate((i, j)))
        norm2 = max(
            (
                float(np.einsum("ij,ij->i", x[rows[s : s + _CHUNK]], x[rows[s : s + _CHUNK]]).max())
                for s in range(0, len(rows), _CHUNK)
            ),
            default=0.0,
        ) / (1 - _gamma(d, _U32))
    return 2 * (_gamma(d, _U32) + _gamma(d, _U64)) * norm2


def _screen(x, i, j, keep_at_least: float, keep_at_most: float, norm2: float | None = None, values: bool = False):
    """Which pairs have keep_at_least <= pair_sims <= keep_at_most, exactly, and with values their
    pair_sims too (else None). Float32 products decide the pairs farther than their error bound
    (_screen_bound) from both limits; pair_sims' float64 arithmetic the others, and gives the values."""
    _check_rows(x, i, j)
    b = _screen_bound(x, i, j, norm2)
    lo, hi = keep_at_least, keep_at_most
    v = _dots32(x, i, j)
    ok = (v >= lo + b) & (v <= hi - b)
    near = (v >= lo - b) & (v <= hi + b)  # holds ok
    need = np.flatnonzero(near if values else near & ~ok)
    sims = np.empty(len(i)) if values else None
    if len(need):
        exact = pair_sims(x, i[need], j[need])
        ok[need] = (exact >= lo) & (exact <= hi)
        if values:
            sims[need] = exact
    return ok, sims


def _screened_recheck(clip, dino, i, j, clip_min, dino_max, sure=None, norms=(None, None)):
    """_recheck's result for candidate pairs, with float64 only where it is needed: the pairs that pass
    (their similarities are pair_sims'), and those whose float32 products lie within the float32
    error bound of a threshold. sure: a mask of pairs already known to reach clip_min (the fast pass
    proves it for integer products far enough above its threshold); the others are screened on CLIP
    first, then the CLIP passes on DINOv2. norms: bounds on the largest squared row norms of clip and
    dino, or None to measure them on the rows involved."""
    if sure is None:
        sure = np.zeros(len(i), bool)
    band = np.flatnonzero(~sure)
    if len(band):
        sure = sure.copy()
        sure[band[_screen(clip, i[band], j[band], clip_min, math.inf, norms[0])[0]]] = True
    i, j = i[sure], j[sure]
    if dino_max == math.inf:  # (a NaN dino_max keeps nothing, as in _recheck)
        return i, j, pair_sims(clip, i, j), pair_sims(dino, i, j)
    keep, dino_sims = _screen(dino, i, j, -math.inf, dino_max, norms[1], values=True)
    i, j = i[keep], j[keep]
    return i, j, pair_sims(clip, i, j), dino_sims[keep]
