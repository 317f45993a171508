"""What the exact miner refuses before it starts: a threshold that is not a number, rows that are not 2-D
float32 or hold NaN or infinite values (check_rows), and rows whose size float32 arithmetic cannot screen
exactly; and what the search is given, checked: its shape (`Shape`; `prepared`, `prepared_across`:
find_pairs' and find_pairs_across' rows with new_rows_of, check_same_dims), its block size (block_rows,
ALIGN). Below the rest of the join (it imports none of it), so also what its checks share with the bounds
above them: the unit roundoff (_U32, _U64, _gamma: the quantisation's and the re-check's bounds too) and
the threads (blas_threads, numpy's BLAS held to n threads; the pool of threads is config.in_threads). Reads
the arrays it is given; writes nothing.

find_pairs (simsearch) screens candidates with float32 products whose proven error bound is relative to the
largest squared row norm, and the fast pass (quantise) bounds its error the same way. Float32 underflows
below 2**-126 and overflows above 2**128, and there those bounds no longer hold: rows of norm about 1e-23
gave an extra and a missing pair against float64 brute force, rows of norm 1e19 a NaN threshold. A row whose
norm is 0 or lies in [NORM_MIN, NORM_MAX] = [2**-50, 2**50] keeps every product, square and sum of
squares 2**26 away from both limits, so every pair is exact; a row outside is refused, by number, in one
line. L2-normalised rows (what `vhmine embed` writes) have norm 1. simsearch.find_pairs and
mine.ray.arrays.find_pairs_ray check every row; a Ray job on an index checks its CLIP rows in the streaming
pass (tiletask.scan_chunk: its DINOv2 rows are only ever re-checked in float64, exact at any scale).
"""

from __future__ import annotations

import functools
import math
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from vhmine.config import in_threads
from vhmine.errors import InputError

NORM_MIN, NORM_MAX = 2.0**-50, 2.0**50  # about 8.9e-16 and 1.1e15


ALIGN = 64  # rows padded and blocks rounded to this: int8 GEMMs want rows > 16 and multiples of 8
_DEFAULT_BLOCK = {"cpu": 8192, "cuda": 16384}
_U32, _U64 = 2.0**-24, 2.0**-53  # unit roundoff of float32 and float64


def _gamma(n: int, unit: float) -> float:
    """Relative bound on a rounded sum of n rounded products (a dot product), in any summation order."""
    return n * unit / (1 - n * unit)


_BLAS_SYMBOLS = (
    ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
    ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
    ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
    ("openblas_get_num_threads", "openblas_set_num_threads"),
)


@functools.lru_cache(maxsize=1)
def _openblas() -> tuple:
    """(get, set) of the thread count of every OpenBLAS loaded in this process (numpy's; faiss brings
    its own), or none (another BLAS, or no /proc to find them in)."""
    import ctypes

    try:
        with open("/proc/self/maps") as f:
            libs = sorted({line.split()[-1] for line in f if "openblas" in line.rsplit("/", 1)[-1].lower()})
    except OSError:
        return ()
    found = []
    for path in libs:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        found += [
            (getattr(lib, get), getattr(lib, put))
            for get, put in _BLAS_SYMBOLS
            if hasattr(lib, get) and hasattr(lib, put)
        ][:1]
    return tuple(found)


@contextmanager
def blas_threads(n: int):
    """Every loaded OpenBLAS in n threads meanwhile: blas-f32 runs in find_pairs' own threads, and a
    BLAS pool beside them spins (on a busy 2-core machine 100x slower than one thread)."""
    libs = _openblas()
    before = [get() for get, _ in libs]
    for _, put in libs:
        put(n)
    try:
        yield
    finally:
        for (_, put), k in zip(libs, before):
            put(k)


@dataclass(frozen=True, eq=False)
class Shape:
    kind: str  # "triangle", "band" or "across"
    new_rows: np.ndarray | None = None  # a band's, sorted and distinct
    na: int = 0  # across: rows of A (then B's)


def block_rows(block_size: int | None, device_type: str) -> int:
    if block_size is not None and block_size < 1:
        raise InputError(f"block size must be at least 1, got {block_size}")
    return -(-(block_size or _DEFAULT_BLOCK.get(device_type, 4096)) // ALIGN) * ALIGN


def check_limits(clip_min, dino_max) -> tuple[float, float]:
    """The two thresholds as floats; InputError naming the argument when one is not a number (NaN)."""
    out = []
    for name, v in (("clip_min", clip_min), ("dino_max", dino_max)):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise InputError(f"{name} must be a number (a cosine similarity threshold), got {v!r}") from None
        if math.isnan(f):
            raise InputError(
                f"{name} is NaN: give a number (a cosine similarity threshold such as 0.9; "
                "+-inf keeps every pair on that side)"
            )
        out.append(f)
    return out[0], out[1]


def check_norms(name: str, x: np.ndarray, n2: np.ndarray, first_row: int | None = None) -> None:
    """InputError naming the first row of x (numbered from first_row: x is then a chunk of the rows, and the
    count is that chunk's) whose norm is neither 0 nor within [NORM_MIN, NORM_MAX]. n2: the rows' float32
    sums of squares (a row of tiny values can sum to 0: such rows are looked at value by value)."""
    n2 = np.asarray(n2)
    lo, hi = NORM_MIN**2, NORM_MAX**2
    out = np.flatnonzero(~((n2 >= lo) & (n2 <= hi)))
    if not len(out):
        return
    small = out[n2[out] < lo]
    out = np.union1d(small[(x[small] != 0).any(axis=1)], out[~(n2[out] < lo)])
    if len(out):
        r = int(out[0])
        norm = float(np.sqrt(np.sum(np.square(x[r].astype(np.float64)))))
        among = "in all" if first_row is None else f"of rows {first_row:,} to {first_row + len(x) - 1:,}"
        raise InputError(
            f"{name} row {(first_row or 0) + r} has norm {norm:.3g} ({len(out)} row(s) {among}): the exact miner needs"
            f" every row's norm to be 0 or within {NORM_MIN:.2g} to {NORM_MAX:.2g}, where its float32 arithmetic"
            " neither underflows nor overflows; L2-normalise the rows (as `vhmine embed` does) or scale them into that"
            " range"
        )


def squared_norms(x: np.ndarray) -> np.ndarray:
    """The float32 sums of squares of x's rows (as simsearch._checked computes them)."""
    return np.einsum("ij,ij->i", x, x)


def check_rows(clip: np.ndarray, dino: np.ndarray, *, screened: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The rows as contiguous float32 arrays, or InputError naming what is wrong: not 2-D float32, NaN or
    infinite values, row counts that differ, and (screened) norms float32 screening cannot handle."""
    return _checked(clip, dino, screened=screened)[:2]


def _checked(
    clip: np.ndarray, dino: np.ndarray, workers=1, *, screened: bool = True, only=None
) -> tuple[np.ndarray, np.ndarray, float | None, float | None]:
    """check_rows, plus a bound on the largest squared row norm of each (workers: see config.in_threads). screened:
    rows are refused whose norms float32 screening cannot handle (rowcheck; float64 alone handles any).
    only: row numbers (new_rows_of's) whose values alone are checked, the others having been checked
    by the earlier join that quantised them; then no bounds (None: the re-check measures its rows')."""
    clip, dino = np.ascontiguousarray(clip), np.ascontiguousarray(dino)
    norms = []
    for name, x in (("clip", clip), ("dino", dino)):
        if x.ndim != 2 or x.dtype != np.float32:
            raise InputError(f"{name} vectors must be a 2-D float32 array, got {x.dtype} with shape {x.shape}")
    if only is not None:
        if len(clip) != len(dino):
            raise InputError(f"clip has {len(clip)} rows but dino has {len(dino)}; the two indexes must be row-aligned")
        rows = new_rows_of(only, len(clip))
        try:
            _checked(clip[rows], dino[rows], workers, screened=screened)
        except InputError as err:  # (its row numbers among the new rows: the caller's instead)
            raise InputError(_renumbered(str(err), rows)) from None
        return clip, dino, None, None
    for name, x in (("clip", clip), ("dino", dino)):
        # one read of the rows: a NaN or infinite value makes its row's sum of squares NaN or infinite;
        # the rows flagged so (also finite rows whose squares overflow) are then looked at value by value
        # (chunks of 8192 rows; one chunk, an empty one for no rows, without threads)
        chunks = range(0, max(len(x), 1), 8192)
        n2 = np.concatenate(in_threads(lambda s, x=x: squared_norms(x[s : s + 8192]), chunks, workers))
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


def prepared(clip, dino, new_rows, quantised, pool) -> tuple[tuple, Shape]:
    """find_pairs' rows checked (with the pool's threads) and its shape: the triangle, or with new_rows the
    band (only the new rows' values checked when an earlier join quantised the others)."""
    rows = _checked(clip, dino, pool, only=None if quantised is None else new_rows)
    n = len(rows[0])
    return rows, (Shape("triangle") if new_rows is None else Shape("band", new_rows_of(new_rows, n)))


def prepared_across(clip_a, dino_a, clip_b, dino_b, pool) -> tuple[tuple, Shape]:
    """find_pairs_across' rows checked (with the pool's threads), laid out A then B, and its shape."""
    sides = []
    for side, (c, d) in (("A", (clip_a, dino_a)), ("B", (clip_b, dino_b))):
        try:
            sides.append(_checked(c, d, pool))
        except InputError as err:
            raise InputError(f"collection {side}: {err}") from None
    (ca, da, ca2, da2), (cb, db, cb2, db2) = sides
    check_same_dims("clip", ca, cb)
    check_same_dims("dino", da, db)
    rows = (np.concatenate([ca, cb]), np.concatenate([da, db]), max(ca2, cb2), max(da2, db2))
    return rows, Shape("across", na=len(ca))


def _renumbered(message: str, rows: np.ndarray) -> str:
    """An InputError's text about a subset's row k, about rows[k] instead."""
    import re

    return re.sub(r"^(clip|dino) row (\d+)", lambda m: f"{m[1]} row {rows[int(m[2])]}", message)


def new_rows_of(new_rows, n: int) -> np.ndarray:
    """new_rows as the sorted distinct row numbers; InputError when not a 1-D array of integers in [0, n)."""
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
    return a


def check_same_dims(name: str, a: np.ndarray, b: np.ndarray) -> None:
    if a.shape[1:] != b.shape[1:]:
        raise InputError(
            f"{name} vectors of the two collections differ in dimension: {a.shape} against {b.shape}; "
            "mine across collections embedded by the same encoders"
        )
