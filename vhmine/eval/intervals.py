"""Intervals on eval's figures and paired comparisons of two models.

Reads and writes nothing: pure functions over counts and per-unit values (numpy, imported where it is used; no
scipy). What report.json gives every figure (`n`, `ci95`, `ci_method`) and its `comparisons` come from here:

- `wilson(right, n)`: the Wilson score interval of a share: of items (accuracy, yes ratio, a mode's accuracy) or
  of units each right or not (pair and image accuracy, G-Acc, qAcc, fAcc; vhmine.eval.units.is_share):
  (p + z^2/2n +- z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n), z the normal quantile at 0.975. Unlike the normal
  interval p +- z sqrt(p(1-p)/n) (what lmms-eval's `mean_stderr` gives, times 1.96) it stays inside [0, 1] and
  is not empty at 0% or 100%.
- `bootstrap(data, statistic)`: the percentile bootstrap over the units a figure that is not a share counts (pair
  groups for a ratio over them, items for F1 or a difference of rates): `resamples` (10,000) draws of as many
  units with replacement, from numpy's Generator (PCG64) seeded with a recorded `seed`; the interval is the 2.5th
  and 97.5th percentiles (linear interpolation) of the statistic over the draws. The draws are the ones
  `scipy.stats.bootstrap(..., method="percentile", rng=numpy.random.default_rng(seed))` makes, so the two give
  the same interval (tests/eval/test_intervals.py).
- `paired_bootstrap(a, b, statistic)`: the difference statistic(a) - statistic(b) of two models on the same
  units, the units drawn jointly (scipy's `paired=True`).
- `mcnemar_exact(b, c)`: the exact McNemar p-value, the two-sided binomial test of b successes in b + c trials
  at 1/2 on the discordant items (b: A right and B wrong; c: the reverse): min(1, 2 P(X <= min(b, c))). In floats,
  in time linear in min(b, c) at most: the point probability P(X = min(b, c)) by Loader's saddle-point form (what
  R's dbinom computes; no cancellation of large log-factorials), the tail by the ratio of neighbouring terms.
- `compare(...)`: one figure of two models: the difference, its paired interval, McNemar's p for a share of units.
- `told_apart(p, ci)`: the one rule for "told apart" (`VERDICT_RULE`): where a figure has an exact test
  (McNemar's, for every share: accuracy, aAcc, the yes ratio, pair and image accuracy, G-Acc, qAcc, fAcc) its
  p < `ALPHA`; elsewhere the paired interval leaves out 0.

How many items a benchmark needs to tell two models apart is vhmine.rules.sample_size (status and export read it).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

LEVEL = 0.95
RESAMPLES = 10_000
SEED = 0
WILSON = "wilson"
BOOTSTRAP = "bootstrap-percentile"
PAIRED = "paired-bootstrap-percentile"
MCNEMAR = "mcnemar-exact"
ALPHA = 0.05  # the exact test's level for "told apart"
VERDICT_RULE = "mcnemar-exact p < 0.05 where there is a p, else the paired 95% interval leaves out 0"
EXACT_UP_TO = 1000  # McNemar's tail as an exact integer sum up to this many discordant items, in floats above
MAX_CELLS = 1 << 16  # resample indices drawn at once (256 KB of int32): larger draws go in batches of rows, whose
# indices and the values they gather (into buffers kept for the whole draw) stay in the cache, and whose memory the
# allocator keeps: 16 MB batches of int64 and new gathers spent more time in page faults than in the draws

Statistic = Callable[..., object]  # statistic(*arrays, axis=-1): one value per resample along the last axis


@dataclass(frozen=True)
class Interval:
    """A figure with its interval: `estimate` over `n` units, [lo, hi] at `level`; all None when n is 0."""

    estimate: float | None
    lo: float | None
    hi: float | None
    n: int
    method: str
    level: float = LEVEL
    undefined: int = 0  # bootstrap draws whose statistic had no value (a ratio over nothing): left out

    def record(self) -> dict:
        """report.json's fields for the figure: `n`, `ci95` ([lo, hi] or None), `ci_method`."""
        return {"n": self.n, "ci95": None if self.lo is None else [self.lo, self.hi], "ci_method": self.method}


@dataclass(frozen=True)
class Comparison:
    """Model `a` minus model `b` on one figure, over the `n` units both were scored on."""

    a: str
    b: str
    figure: str
    diff: float | None
    lo: float | None
    hi: float | None
    n: int
    p_value: float | None  # exact McNemar, for a share of units only (0/1 per unit)
    method: str

    @property
    def distinguishable(self) -> bool:
        """Told apart by `VERDICT_RULE`: McNemar's p < 0.05 where there is one, else the interval leaves out 0."""
        return told_apart(self.p_value, None if self.lo is None else (self.lo, self.hi))

    @property
    def verdict_rule(self) -> str:
        """Which test decided `distinguishable`: the exact test where there is a p, else the paired interval."""
        return f"{MCNEMAR} p < {ALPHA}" if self.p_value is not None else f"{PAIRED} 95% interval leaves out 0"

    def record(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "figure": self.figure,
            "diff": self.diff,
            "n": self.n,
            "ci95": None if self.lo is None else [self.lo, self.hi],
            "p_value": self.p_value,
            "method": self.method,
            "distinguishable": self.distinguishable,
            "verdict_rule": self.verdict_rule,
        }


def told_apart(p_value: float | None, ci: Sequence[float] | None) -> bool:
    """The one verdict (`VERDICT_RULE`): with an exact test's p, p < `ALPHA`; without one, the interval [lo, hi]
    leaves out 0 (a bound at 0 holds it); never, with neither."""
    if p_value is not None:
        return p_value < ALPHA
    return bool(ci) and ci[0] is not None and (ci[0] > 0 or ci[1] < 0)


def settings(resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL) -> dict:
    """What report.json records once, so that every bootstrap interval can be drawn again."""
    return {
        "level": level,
        "bootstrap": {"resamples": resamples, "seed": seed, "generator": "numpy PCG64", "percentiles": "linear"},
        "verdict_rule": VERDICT_RULE,
    }


def _z(p: float) -> float:
    return NormalDist().inv_cdf(p)


def wilson(right: int, n: int, level: float = LEVEL) -> Interval:
    """The Wilson score interval of `right` successes in `n` items."""
    if n < 0 or not 0 <= right <= n:
        raise ValueError(f"wilson: {right} right of {n} is not a count")
    if n == 0:
        return Interval(None, None, None, 0, WILSON, level)
    z = _z(1 - (1 - level) / 2)
    p = right / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at 0 and n the bounds are 0 and 1 exactly; rounding must not put them a hair outside
    lo = 0.0 if right == 0 else max(0.0, centre - half)
    hi = 1.0 if right == n else min(1.0, centre + half)
    return Interval(p, lo, hi, n, WILSON, level)


def mean(x, axis: int = -1):
    """The default statistic: the share of units right (values 0/1), or any mean."""
    import numpy as np

    return np.mean(x, axis=axis)


def ratio(num, den, axis: int = -1):
    """sum(num) / sum(den): precision (right yes / said yes), a false-positive ratio, an attack success rate.
    NaN where the denominator is 0 (bootstrap leaves such draws out and counts them)."""
    import numpy as np

    top, bottom = np.sum(num, axis=axis), np.sum(den, axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(bottom == 0, np.nan, top / np.where(bottom == 0, 1, bottom))


def _arrays(data) -> list:
    import numpy as np

    arrays = [np.asarray(d, dtype=float) for d in (data if isinstance(data, tuple) else (data,))]
    if any(a.ndim != 1 for a in arrays) or len({a.shape[0] for a in arrays}) != 1:
        raise ValueError("bootstrap: give one value per unit (1-D arrays of one length, one per statistic argument)")
    return arrays


def _draws(arrays: list, statistic: Statistic, resamples: int, seed: int):
    """The statistic on each of `resamples` draws of the units, drawn as scipy.stats.bootstrap draws them:
    rng.integers(0, n, (resamples, n)), row by row (the Generator's stream does not depend on the batch). Below 2^31
    units the indices are drawn as int32: for a range within 32 bits numpy draws int64 and int32 from the same 32-bit
    stream (bounded Lemire), so they are the same numbers, in half the memory."""
    import numpy as np

    n = arrays[0].shape[0]
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    rows = max(1, min(resamples, MAX_CELLS // max(n, 1)))
    dtype = np.int32 if n <= np.iinfo(np.int32).max else np.int64
    gathered = [np.empty(rows * n) for _ in arrays]
    for start in range(0, resamples, rows):
        m = min(rows, resamples - start)
        idx = rng.integers(0, n, (m, n), dtype=dtype)
        # mode="clip" writes straight into the buffer ("raise" buffers `out` again); every index is in range
        values = [a.take(idx, out=g[: m * n].reshape(m, n), mode="clip") for a, g in zip(arrays, gathered)]
        out[start : start + m] = statistic(*values, axis=-1)
    return out


def _percentiles(draws, level: float) -> tuple[float | None, float | None, int]:
    import numpy as np

    finite = draws[np.isfinite(draws)]
    if finite.size == 0:
        return None, None, int(draws.size)
    alpha = (1 - level) / 2
    lo, hi = np.quantile(finite, [alpha, 1 - alpha])
    return float(lo), float(hi), int(draws.size - finite.size)


def _value(x) -> float | None:
    v = float(x)
    return None if math.isnan(v) else v


def bootstrap(
    data, statistic: Statistic = mean, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> Interval:
    """The percentile bootstrap interval of `statistic` over units. `data`: one value per unit (a pair's 1 when
    every question of it is right, else 0), or a sequence of such arrays that `statistic` takes together (the
    numerator and denominator of a `ratio`) as a tuple, all drawn with the same units."""
    arrays = _arrays(data)
    n = arrays[0].shape[0]
    if n == 0:
        return Interval(None, None, None, 0, BOOTSTRAP, level)
    lo, hi, undefined = _percentiles(_draws(arrays, statistic, resamples, seed), level)
    return Interval(_value(statistic(*arrays, axis=-1)), lo, hi, n, BOOTSTRAP, level, undefined)


def paired_bootstrap(
    a, b, statistic: Statistic = mean, resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> Interval:
    """The percentile bootstrap interval of statistic(a) - statistic(b), two models' values on the same units
    (unit i of `a` is unit i of `b`), the units drawn jointly."""
    xs, ys = _arrays(a), _arrays(b)
    if len(xs) != len(ys) or xs[0].shape != ys[0].shape:
        raise ValueError("paired_bootstrap: the two models' values must be on the same units, in the same order")
    k = len(xs)

    def diff(*arrays, axis=-1):
        return statistic(*arrays[:k], axis=axis) - statistic(*arrays[k:], axis=axis)

    n = xs[0].shape[0]
    if n == 0:
        return Interval(None, None, None, 0, PAIRED, level)
    lo, hi, undefined = _percentiles(_draws(xs + ys, diff, resamples, seed), level)
    return Interval(_value(diff(*xs, *ys)), lo, hi, n, PAIRED, level, undefined)


_LN_2PI = math.log(2 * math.pi)
_LN_SQRT_2PI = 0.5 * _LN_2PI


def _stirlerr(n: int) -> float:
    """log(n!) - log(sqrt(2 pi n) (n/e)^n), the error of Stirling's formula (Loader 2000; R's stirlerr)."""
    if n <= 15:
        return math.log(math.factorial(n)) - (n + 0.5) * math.log(n) + n - _LN_SQRT_2PI
    s0, s1, s2, s3, s4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
    nn = float(n) * n
    if n > 500:
        return (s0 - s1 / nn) / n
    if n > 80:
        return (s0 - (s1 - s2 / nn) / nn) / n
    if n > 35:
        return (s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / n
    return (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / n


def _bd0(x: float, m: float) -> float:
    """x log(x/m) + m - x without its cancellation when x is near m (Loader 2000; R's bd0)."""
    if abs(x - m) < 0.1 * (x + m):
        v = (x - m) / (x + m)
        s = (x - m) * v
        ej = 2 * x * v
        v *= v
        j = 1
        while True:
            ej *= v
            s1 = s + ej / (2 * j + 1)
            if s1 == s:
                return s1
            s = s1
            j += 1
    return x * math.log(x / m) + m - x


def _half_pmf(k: int, n: int) -> float:
    """P(X = k), X ~ Bin(n, 1/2), 0 < k < n, to a few ulps (Loader's saddle-point form)."""
    half = n / 2
    lc = _stirlerr(n) - _stirlerr(k) - _stirlerr(n - k) - _bd0(k, half) - _bd0(n - k, half)
    lf = _LN_2PI + math.log(k) + math.log1p(-k / n)
    return math.exp(lc - 0.5 * lf)


def mcnemar_exact(b: int, c: int) -> float:
    """The exact two-sided McNemar p-value of b and c discordant items: min(1, 2 P(X <= min(b, c))), X ~ Bin(b + c,
    1/2) (scipy.stats.binomtest(b, b + c).pvalue); 1.0 when b == c (no item discordant included). Up to
    `EXACT_UP_TO` discordant items the tail is an exact integer sum; above, P(X = k) times the sum of the ratios of
    its terms to it, summed down from k = min(b, c) until they no longer count: at most k + 1 terms, a few hundred
    in practice (within 1e-14 of scipy's binomtest at 20,000 each way, in well under a millisecond)."""
    if b < 0 or c < 0:
        raise ValueError(f"mcnemar_exact: discordant counts {b}, {c} must not be negative")
    if b == c:
        return 1.0  # P(X <= n/2) >= 1/2
    n, k = b + c, min(b, c)
    if k == 0:
        return math.ldexp(1.0, 1 - n)  # 2 * 2^-n, 0.0 once it underflows
    if n <= EXACT_UP_TO:  # small counts: the integer sum, each term from the last, rounded once
        term = tail = 1
        for i in range(1, k + 1):
            term = term * (n - i + 1) // i
            tail += term
        return min(1.0, (2 * tail) / (1 << n))
    total, term = 1.0, 1.0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1)  # P(X = i - 1) / P(X = k)
        total += term
        if term < total * 1e-17:
            break
    return min(1.0, 2 * _half_pmf(k, n) * total)


def compare(
    a: str,
    b: str,
    figure: str,
    a_values,
    b_values,
    statistic: Statistic = mean,
    binary: bool = False,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    level: float = LEVEL,
) -> Comparison:
    """Model `a` against model `b` on `figure`: the paired bootstrap interval of the difference over the units both
    were scored on (values in the same unit order) and, for a share (`binary`: one 0/1 value per unit, the figure
    their mean: an item, pair or image right or not), the exact McNemar p-value of its discordant units."""
    iv = paired_bootstrap(a_values, b_values, statistic, resamples, seed, level)
    p = None
    method = PAIRED
    if binary:
        xs, ys = _arrays(a_values)[0], _arrays(b_values)[0]
        p = mcnemar_exact(int(((xs == 1) & (ys == 0)).sum()), int(((xs == 0) & (ys == 1)).sum()))
        method = f"{PAIRED}; {MCNEMAR}"
    return Comparison(a, b, figure, iv.estimate, iv.lo, iv.hi, iv.n, p, method)


def item_values(correct: Sequence[bool]) -> list[int]:
    """Right/wrong per item as the 0/1 values bootstrap and compare take."""
    return [1 if c else 0 for c in correct]
