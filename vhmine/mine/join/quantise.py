"""The fast pass's quantisation: CLIP rows as int8 rows, and the proven bound on the error of their
integer products (fast_pass -> FastPass). Reads the float32 rows it is given; writes nothing.

Real CLIP embeddings have a few dimensions far larger than the rest, which would set a coarse
quantisation step for all of them. fast_pass then first turns the rows by an orthogonal map, Spread (a
few Householder reflections that move each dominant dimension onto a flat direction of its own:
4 k d operations a row, against d^2 for a dense rotation): inner products stay the same and the step
shrinks. The Ray engine's per-tile quantiser (vhmine.mine.join.blocks) goes through the same functions.
_quantise also takes any float32 orthogonal matrix as its turn (`rotation`, a seeded dense random one:
what the tests check its bound with), measuring how far from orthogonal it is.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from vhmine.config import in_threads
from vhmine.mine.join.kernels import qmax_for  # (the kernels' exact range: their module's)
from vhmine.mine.join.rowcheck import _U32, _U64, ALIGN, _gamma

_SPREAD = 32  # at most this many dominant dimensions are spread out before quantising
SAMPLE_ROWS = 4096  # rows the turn is judged on


@functools.lru_cache(maxsize=4)
def rotation(d: int, seed: int = 0) -> np.ndarray:
    """A random orthogonal d x d matrix in float32 (QR of a seeded Gaussian), one of the turns
    _quantise accepts. Exactness never rests on it being orthogonal: _quantise measures how far it is
    from that and widens the margin to match. fast_pass uses the cheaper `spread` instead."""
    qm, rm = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, d)))
    m = (qm * np.sign(np.diag(rm))).astype(np.float32)
    m.flags.writeable = False
    return m


@dataclass(frozen=True, eq=False)
class Spread:
    """An orthogonal map that moves each of a few dominant dimensions onto a flat direction of its
    own (components +-1/sqrt(d/k) on its share of the coordinates), as a product of k Householder
    reflections in compact form: z = x - (x q) p^T, in float32 (torch). That costs 4 k d operations a row,
    against d^2 for a dense rotation, and spreads such dimensions as well as one.

    orth = ||M^T M - I||_F for M = I - p q^T with p, q as stored (plus float64 rounding), and gamma
    bounds |z - M x| / |x| for z as computed (see _quantise)."""

    pt: np.ndarray  # p^T, k x d float32
    qt: np.ndarray  # q^T
    dims: tuple[int, ...]
    orth: float
    gamma: float

    @property
    def p(self) -> np.ndarray:
        return self.pt.T

    @property
    def q(self) -> np.ndarray:
        return self.qt.T

    # torch, not numpy: numpy's matmul sends products this thin to BLAS's thread pool, which stalls on
    # a busy machine, and its einsum is half as fast as torch's matmul in the calling thread
    def coefficients(self, x: np.ndarray) -> np.ndarray:
        return (_tensor(x) @ _tensor(self.qt).T).numpy()

    def apply(self, x: np.ndarray, c: np.ndarray, out: np.ndarray) -> None:
        """z = x - c p^T for c = coefficients(x), into out."""
        import torch

        torch.addmm(_tensor(x), _tensor(c), _tensor(self.pt), alpha=-1, out=torch.from_numpy(out))

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        self.apply(x, self.coefficients(x), out)


def _tensor(a: np.ndarray):
    """a as a CPU tensor (a read-only array, which torch will not wrap, copied)."""
    import torch

    return torch.from_numpy(a if a.flags.writeable else a.copy())


@functools.lru_cache(maxsize=16)
def spread(d: int, dims: tuple[int, ...], seed: int = 0) -> Spread:
    """The Spread for these dimensions of d (in this order), with seeded signs and shares."""
    rng = np.random.default_rng(seed)
    shares = np.array_split(rng.permutation(d), len(dims))
    vs = []
    for k, share in zip(dims, shares):
        f = np.zeros(d)
        f[share] = rng.choice([-1.0, 1.0], len(share)) / math.sqrt(len(share))
        w = np.zeros(d)  # where the reflections so far take e_k; a reflection then takes it onto f
        w[k] = 1.0
        for v in vs:
            w -= 2 * (v @ w) * v
        v = w - f
        if np.linalg.norm(v) > 1e-6:
            vs.append(v / np.linalg.norm(v))
    v = np.array(vs).reshape(-1, d)  # the reflections' unit vectors, one a row
    k = len(v)
    t = np.zeros((k, k))  # H_k ... H_1 = I - v^T t v, t lower triangular
    for a in range(k):
        t[a, :a] = -2 * (v[:a] @ v[a]) @ t[:a, :a]
        t[a, a] = 2.0
    pt, qt = np.ascontiguousarray((t.T @ v).astype(np.float32)), np.ascontiguousarray(v.astype(np.float32))
    p64, q64 = pt.T.astype(np.float64), qt.T.astype(np.float64)
    pp = p64.T @ p64
    # M^T M - I for M = I - p q^T (einsum: d x d products by BLAS would use its thread pool)
    e = np.einsum("ia,ab,jb->ij", q64, pp, q64) - np.einsum("ia,ja->ij", q64, p64) - np.einsum("ia,ja->ij", p64, q64)
    orth = float(np.linalg.norm(e)) + 1e-12
    # With c = x q: the float32 c errs by at most gamma_d |x| ||q||_F (each entry a dot product of
    # length d), which p^T carries over at most ||p||_2-fold (||p||_2^2 = the largest eigenvalue of
    # p^T p); c p^T, entries of length k, errs by gamma_k |c| ||p||_F more, |c| <= ||q||_F (1 + gamma_d)
    # |x|; the subtraction rounds z once, |z| <= (sqrt(1 + orth) + those) |x|. 1.01: the rounding of
    # the norms.
    nq, npf = 1.01 * float(np.linalg.norm(q64)), 1.01 * float(np.linalg.norm(p64))
    np2 = 1.01 * math.sqrt(max(float(np.linalg.eigvalsh(pp).max()), 0.0)) if k else 0.0
    g1 = np2 * _gamma(d, _U32) * nq + _gamma(max(k, 1), _U32) * npf * nq * (1 + _gamma(d, _U32))
    gamma = g1 + _U32 / (1 - _U32) * (math.sqrt(1 + orth) + g1)
    for a in (pt, qt):
        a.flags.writeable = False
    return Spread(pt, qt, tuple(dims), orth, gamma)


def _dominant_dims(x: np.ndarray, force: bool) -> tuple[int, ...]:
    """Dimensions whose largest |value| in these rows is over twice the median dimension's, largest
    first (at most _SPREAD); with force, at least the largest one."""
    top = np.abs(x).max(axis=0)
    order = np.argsort(-top, kind="stable")
    k = min(int((top > 2 * np.median(top)).sum()), _SPREAD)
    return tuple(int(a) for a in order[: max(k, int(force))])


class _Dense:
    """A turn by a float32 matrix m (z = m x in float32), for _quantise."""

    def __init__(self, m: np.ndarray):
        d = len(m)
        m64 = m.astype(np.float64)
        self.m = m
        self.orth = float(np.linalg.norm(m64.T @ m64 - np.eye(d))) + 1e-12  # + the float64 sum's own rounding
        # each z_k is a float32 dot product of length d: |u_k - z_k| <= gamma_d |m_k| |x|
        self.gamma = _gamma(d, _U32) * math.sqrt(d) * float(np.linalg.norm(m64, axis=1).max())

    def __call__(self, x: np.ndarray, out: np.ndarray) -> None:
        np.matmul(x, self.m.T, out=out)


@dataclass(frozen=True)
class _Quantised:
    q: np.ndarray
    scale: float
    err: float
    norm2: float  # a bound on every row's squared norm
    stats: ChunkStats | None = None


@dataclass(frozen=True)
class ChunkStats:
    """What the error bound needs of some rows, as quantise_chunk measured them in float32: the largest
    |q|^2, squared residual |z - scale q|^2 and squared row norm |x|^2. Several chunks combine by max."""

    h2: float = 0.0
    r2: float = 0.0
    xn2: float = 0.0

    def __or__(self, other: ChunkStats) -> ChunkStats:
        return ChunkStats(max(self.h2, other.h2), max(self.r2, other.r2), max(self.xn2, other.xn2))


def scale_for(amax: float, qmax: int) -> float:
    """The quantisation step for rows whose largest (turned) component is amax: a float32 number."""
    return float(np.float32(amax / qmax)) if amax > 2.0**-60 else 1.0


def chunk_rows(d: int) -> int:
    """Rows per chunk of the quantisation: 2**19 float32 values (2 MiB, in the L2 or L3 cache; smaller chunks
    cost more in calls than they save in cache misses)."""
    return max(16, 2**19 // max(d, 1))


def choose_turn(sample: np.ndarray, rotate: bool | None = None) -> tuple[int, ...]:
    """The dimensions fast_pass spreads (`spread`; empty: no turn), judged on an even sample of the rows.
    rotate None: when spreading shrinks the sample's largest component 1.5x or more; True: always
    (at least the largest dimension); False: never."""
    if rotate is False or not len(sample):
        return ()
    dims = _dominant_dims(sample, force=bool(rotate))
    if dims and rotate is None:
        sp = spread(sample.shape[1], dims)
        # numpy, not the turn's torch: the Ray driver decides this too, and need not import torch for it
        turned = sample - (sample @ sp.qt.T) @ sp.pt
        if not 1.5 * float(np.abs(turned).max()) <= float(np.abs(sample).max()):
            return ()
    return dims


def turned(x: np.ndarray, turn) -> np.ndarray:
    """Rows z = turn(x) (x itself without a turn)."""
    if turn is None:
        return x
    z = np.empty_like(x)
    turn(x, z)
    return z


def largest(z: np.ndarray) -> float:
    return float(max(-z.min(), z.max())) if z.size else 0.0


def quantise_chunk(x: np.ndarray, z: np.ndarray, scale: float, qmax: int, out: np.ndarray) -> ChunkStats:
    """Rows z (turned x) as integers rint(z / scale) into out[:, :d] (int8), and their ChunkStats."""
    d = x.shape[1]
    t = np.multiply(z, np.float32(1 / scale))
    np.rint(t, out=t)
    np.clip(t, -qmax, qmax, out=t)  # (a no-op when scale came from these very z; the residual covers it anyway)
    out[: len(z), :d] = t
    h2 = float(np.einsum("ij,ij->i", t, t).max()) if len(t) else 0.0
    np.multiply(t, np.float32(scale), out=t)
    np.subtract(z, t, out=t)
    if not len(t):
        return ChunkStats()
    return ChunkStats(h2, float(np.einsum("ij,ij->i", t, t).max()), float(np.einsum("ij,ij->i", x, x).max()))


def error_bound(stats: ChunkStats, scale: float, d: int, turn) -> tuple[float, float]:
    """(err, norm2): _quantise's bound on |x.y - scale^2 q_x.q_y| for every pair of rows the stats cover,
    and a bound on their squared norms, from quantise_chunk's float32 measures (see _quantised)."""
    orth, gamma = (turn.orth, turn.gamma) if turn is not None else (0.0, 0.0)
    g = _gamma(d, _U32)
    xn2 = stats.xn2 / (1 - g)
    xh2 = stats.h2 * scale * scale
    r = math.sqrt(stats.r2 / (1 - g)) / (1 - _U32) + _U32 * math.sqrt(xh2) + gamma * math.sqrt(xn2)
    return r * (math.sqrt(xn2 * (1 + orth)) + math.sqrt(xh2)) + orth * xn2, xn2


def thresholds(clip_min: float, err: float, norm2: float, scale: float, d: int, qmax: int) -> tuple[int, int]:
    """(thresh, sure): every pair with float64 CLIP sim >= clip_min has integer product >= thresh, and
    every pair whose product is >= sure has float64 sim >= clip_min.

    A pair with float64 sim >= clip_min has real sim >= clip_min - gamma_d |x||y| (the float64 sum's own
    rounding) and so integer product >= (clip_min - err - that) / scale^2; and one whose product is
    >= (clip_min + err + that) / scale^2 has float64 sim >= clip_min. slack covers that term (1e-13 at
    d = 768 for unit rows) and the rounding of the norms behind err with room to spare."""
    slack = 1e-9 + 2 * _gamma(d, _U64) * norm2
    limit = d * qmax * qmax + 1  # |q_x.q_y| never exceeds this; clamping also keeps +-inf thresholds finite
    s2 = scale**2
    return (
        math.floor(min(max((clip_min - err - slack) / s2, -limit), limit)),
        math.ceil(min(max((clip_min + err + slack) / s2, -limit), limit)),
    )


def _quantise(x: np.ndarray, qmax: int, rows: int, m=None) -> tuple[np.ndarray, float, float]:
    """Rows z (z = m x when a turn m is given: a float32 orthogonal matrix such as rotation(d), or a
    Spread; else x) as integers q in [-qmax, qmax], z ~ scale * q (zero-padded to `rows` x a multiple
    of 8, which changes no product), plus a bound on the error of any product against the original rows.

    With u = m x exactly: x.y - xh.yh = u.(v - yh) + (u - xh).yh - x.(m^T m - I)y. By Cauchy-Schwarz
    |x.y - scale^2 q_x.q_y| <= R (max|u| + max|xh|) + E max|x|^2, with E = ||m^T m - I||_F (measured;
    0 without m), |u| <= sqrt(1 + E)|x|, and R the largest |u - xh| <= |z - xh| + |u - z|, where
    |u - z| <= gamma |x| (the turn's float error; 0 without one). The integer products are exact, so
    this bound is the fast pass's whole error.
    """
    qz = _quantised(x, qmax, rows, m)
    return qz.q, qz.scale, qz.err


def _quantised(x: np.ndarray, qmax: int, rows: int, m=None, workers=1) -> _Quantised:
    """_quantise, plus the bound on the squared row norms (workers: see config.in_threads). The work is float32,
    in chunks of rows that stay in cache, and every rounding in it is bounded:

    - scale is a float32 number, so xh = scale * q is exact in float64; q = rint(z / scale), which
      stays within [-qmax, qmax] (|z| / scale <= qmax (1 + 3u) < qmax + 1/2);
    - the residual e = z - fl(scale * q), each subtraction and product rounded once, is within
      |e| / (1 - u) + u |xh| of z - xh (u = 2^-24), and its squared norm, a float32 sum of squares,
      within gamma_d of itself; so are the squared norms of x;
    - |q|^2 is a sum of integers below 2^24 (qmax^2 d < 2^24), exact in float32.
    """
    n, d = x.shape
    turn = _Dense(m) if isinstance(m, np.ndarray) else m
    step = chunk_rows(d)

    # z is turned twice, chunk by chunk, never all stored; a Spread keeps its k coefficients a row
    # (k: its reflections, fewer than its dims where one already lay on its share, as in rows of width 1)
    coef = np.empty((n, len(turn.pt)), np.float32) if isinstance(turn, Spread) else None

    def rows_z(s: int, first: bool = False) -> np.ndarray:  # z for the rows of the chunk from s
        xc = x[s : s + step]
        if coef is None:
            return turned(xc, turn)
        zc = np.empty_like(xc)
        if first:
            coef[s : s + len(xc)] = turn.coefficients(xc)
        turn.apply(xc, coef[s : s + len(xc)], zc)
        return zc

    # a first pass: the scale follows the largest (turned) component
    amax = max(in_threads(lambda s: largest(rows_z(s, first=True)), range(0, n, step), workers), default=0.0)
    scale = scale_for(amax, qmax)
    q = np.zeros((rows, -(-d // 8) * 8), np.int8)
    parts = in_threads(
        lambda s: quantise_chunk(x[s : s + step], rows_z(s), scale, qmax, q[s : s + step]), range(0, n, step), workers
    )
    stats = functools.reduce(ChunkStats.__or__, parts, ChunkStats())
    err, norm2 = error_bound(stats, scale, d, turn)
    return _Quantised(q, scale, err, norm2, stats)


@dataclass(frozen=True, eq=False)
class FastPass:
    """What every block of the fast CLIP pass reads: n int8 rows (zero-padded to a multiple of 64) and
    the integer threshold that every pair with float64 CLIP sim >= clip_min provably reaches; and
    `sure`, the integer product at or above which a pair provably has float64 CLIP sim >= clip_min."""

    q: np.ndarray
    thresh: int
    margin: float  # bound on |float64 sim - scale^2 * integer product|
    rotated: bool
    n: int
    scale: float = 1.0
    sure: int | None = None
    qmax: int = 127
    dims: tuple[int, ...] = ()  # the dimensions the turn spreads (spread): what quantised these rows, with
    stats: ChunkStats | None = None  # scale and qmax; and what its error bound needs (a later join reuses it)


def sample_rows(n: int) -> np.ndarray:
    """The rows the turn is judged on: an even sample of at most SAMPLE_ROWS."""
    return np.linspace(0, n - 1, min(n, SAMPLE_ROWS)).astype(np.int64)


def fast_pass(
    clip: np.ndarray, clip_min: float, rotate: bool | None = None, *, workers=1, qmax: int | None = None
) -> FastPass:
    """Quantise the (checked) CLIP rows once. rotate: first turn them by an orthogonal map that
    spreads the few dimensions far larger than the rest (`spread`) [default: when that shrinks the
    quantisation step 1.5x or more on an even sample of rows, as with real CLIP embeddings]. workers:
    threads for the quantisation, or a concurrent.futures.Executor. qmax: at most this many levels
    (the products kernel's, kernels.Kernel.levels) [default and ceiling: qmax_for(d)]."""
    n, d = clip.shape
    qmax = qmax_for(d) if qmax is None else max(1, min(qmax, qmax_for(d)))
    dims = choose_turn(clip[sample_rows(n)], rotate) if n else ()
    turn = spread(d, dims) if dims else None
    qz = _quantised(clip, qmax, -(-n // ALIGN) * ALIGN, turn, workers)
    thresh, sure = thresholds(clip_min, qz.err, qz.norm2, qz.scale, d, qmax)
    return FastPass(qz.q, thresh, qz.err, turn is not None, n, qz.scale, sure, qmax, tuple(dims), qz.stats)


@dataclass(frozen=True, eq=False)
class Quantised:
    """The quantised rows every part reads, and the thresholds: thresh (every pair with float64 CLIP sim
    >= clip_min reaches it), sure (a product there proves clip_min), margin; fp: the FastPass of all rows
    in the caller's order when there is one (stats["quantised"]), kept: the earlier join's, when reused."""

    thresh: int
    sure: int | None
    margin: float
    rotated: bool
    fp: FastPass | None = None
    new_q: np.ndarray | None = None  # a band's new rows, from the kept quantiser (kept is not None)
    kept: FastPass | None = None
