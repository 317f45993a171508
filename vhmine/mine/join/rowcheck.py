"""What the exact miner refuses before it starts: a threshold that is not a number, and rows whose size
float32 arithmetic cannot screen exactly. Reads the arrays it is given; writes nothing.

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

import math

import numpy as np

from vhmine.errors import InputError

NORM_MIN, NORM_MAX = 2.0**-50, 2.0**50  # about 8.9e-16 and 1.1e15


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
