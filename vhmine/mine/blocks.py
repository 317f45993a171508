"""One tile of the exact join from its two row blocks, each quantised with parameters recorded once
for the whole collection: what a task of `vhmine mine --engine ray` computes. Pure computation: it
reads the arrays it is given (ray_tasks reads them from the index by row range) and writes nothing.

The quantisation is simsearch's (fast_pass / _quantise): rows z (z = R x for the seeded random
rotation R, when the rotation is on, else x) become integers q in [-qmax, qmax] with z ~ scale * q.
Here scale and the rotation are fixed before any tile starts, from one streaming pass over every row
(`scan_block` per row chunk, merged by `Quantiser.from_scan`): so every block is quantised the same way,
in whichever tile and on whichever node it is. The error bound of simsearch._quantise's docstring is
measured per block (`BlockStats`: largest residual, row norm and quantised norm, combined by max, so
the bound of a tile covers both its blocks), and each tile's integer threshold follows from its two
blocks' stats: it provably reaches every pair at or above clip_min. Candidates get the float64 re-check
through simsearch.pair_sims, so a tile's pairs are bit for bit those of find_pairs on the same rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vhmine.mine.simsearch import _ALIGN, BlockMiner, pair_sims, rotation

_ROT_CHUNK = 4096  # rows per float32 rotation product, as simsearch._quantise
_Q_CHUNK = 512  # rows per float64 quantisation step, as simsearch._quantise
SAMPLE_ROWS = 4096  # rows the rotation decision looks at, as simsearch.fast_pass


def qmax_for(d: int) -> int:
    """Quantisation levels: qmax^2 * d below 2**24 keeps the float32 fallback exact (as fast_pass)."""
    return min(127, math.isqrt((2**24 - 1) // max(d, 1)))


def _rotate(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    z = np.empty_like(x)
    for s in range(0, len(x), _ROT_CHUNK):
        np.matmul(x[s:s + _ROT_CHUNK], m.T, out=z[s:s + _ROT_CHUNK])
    return z


def scan_block(x: np.ndarray) -> tuple[float, float]:
    """The streaming pass over one chunk of rows: (max |x|, max |R x|)."""
    if not len(x):
        return 0.0, 0.0
    z = _rotate(x, rotation(x.shape[1]))
    return float(np.abs(x).max()), float(max(-z.min(), z.max()))


def sample_rows(n: int) -> np.ndarray:
    """The rows fast_pass judges the rotation on: an even sample of at most SAMPLE_ROWS."""
    return np.linspace(0, n - 1, min(n, SAMPLE_ROWS)).astype(np.int64)


@dataclass(frozen=True)
class Quantiser:
    """How every block is quantised: scale, levels and whether rows are rotated first."""

    dim: int
    scale: float
    qmax: int
    rotated: bool

    @classmethod
    def from_scan(cls, dim: int, xmax: float, zmax: float, sample: np.ndarray, rotate: bool | None = None):
        """fast_pass's choice from the merged scan (max |x|, max |R x| over every row) and its sample:
        rotate when that shrinks the quantisation step 1.5x or more (rotate=None), scale from the largest
        component of the rows as quantised."""
        if rotate is None:
            rotate = len(sample) > 0 and 1.5 * float(np.abs(sample @ rotation(dim).T).max()) <= xmax
        amax = zmax if rotate else xmax
        qmax = qmax_for(dim)
        return cls(dim, amax / qmax if amax > 0 else 1.0, qmax, bool(rotate))

    def as_dict(self) -> dict:
        return {"dim": self.dim, "scale": self.scale, "qmax": self.qmax, "rotated": self.rotated}


@dataclass(frozen=True)
class BlockStats:
    """What the error bound needs of a block: the largest squared residual |z - scale q|^2, squared row
    norm |x|^2 and squared quantised norm |scale q|^2. Several blocks combine by max."""

    r2: float
    xn2: float
    xh2: float

    def __or__(self, other: "BlockStats") -> "BlockStats":
        return BlockStats(max(self.r2, other.r2), max(self.xn2, other.xn2), max(self.xh2, other.xh2))


def quantise_block(x: np.ndarray, qz: Quantiser) -> tuple[np.ndarray, BlockStats]:
    """Rows x as int8 rows (zero-padded to a multiple of 64 rows and of 8 columns: no product changes),
    and the block's stats; simsearch._quantise's arithmetic, with the recorded scale."""
    n, d = x.shape
    z = _rotate(x, rotation(d)) if qz.rotated else x
    q = np.zeros((-(-max(n, 1) // _ALIGN) * _ALIGN, -(-d // 8) * 8), np.int8)
    r2 = xn2 = xh2 = 0.0
    for s in range(0, n, _Q_CHUNK):
        x64 = x[s:s + _Q_CHUNK].astype(np.float64)
        xn2 = max(xn2, np.einsum("ij,ij->i", x64, x64).max())
        z64 = x64 if not qz.rotated else z[s:s + _Q_CHUNK].astype(np.float64)
        qs = np.clip(np.rint(z64 * (1 / qz.scale)), -qz.qmax, qz.qmax)
        q[s:s + len(qs), :d] = qs
        xh2 = max(xh2, np.einsum("ij,ij->i", qs, qs).max() * qz.scale**2)
        z64 -= qs * qz.scale
        r2 = max(r2, np.einsum("ij,ij->i", z64, z64).max())
    return q, BlockStats(float(r2), float(xn2), float(xh2))


def threshold(qz: Quantiser, stats: BlockStats, clip_min: float) -> tuple[int, float]:
    """(integer threshold, error bound) for pairs of rows the stats cover: every pair with float64 sim
    >= clip_min reaches the threshold (simsearch._quantise's bound, fast_pass's rounding allowance)."""
    d = qz.dim
    gamma = orth = 0.0
    if qz.rotated:
        m64 = rotation(d).astype(np.float64)
        orth = float(np.linalg.norm(m64.T @ m64 - np.eye(d))) + 1e-12
        gamma = d * 2.0**-24 / (1 - d * 2.0**-24) * math.sqrt(d) * float(np.linalg.norm(m64, axis=1).max())
    r = math.sqrt(stats.r2) + gamma * math.sqrt(stats.xn2)
    err = r * (math.sqrt(stats.xn2 * (1 + orth)) + math.sqrt(stats.xh2)) + orth * stats.xn2
    limit = d * qz.qmax * qz.qmax + 1
    return math.floor(min(max((clip_min - err - 1e-9) / qz.scale**2, -limit), limit)), err


_MINERS: dict = {}  # (device, block, width) -> BlockMiner: its product buffer is reused from tile to tile


def tile_candidates(qa, qb, r: int, c: int, thresh: int, n: int, *, device, block: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows (i, j), i < j < n, of the tile (row block at r, column block at c >= r) whose integer product
    reaches thresh; qa and qb are quantise_block's rows (qb is qa on the diagonal)."""
    import torch

    key = (str(device), block, qa.shape[1])
    if key not in _MINERS:
        _MINERS.clear()  # one buffer per worker
        _MINERS[key] = BlockMiner(None, None, 0.0, 0.0, thresh, n, device=torch.device(device), block=block,
                                  width=qa.shape[1])
    miner = _MINERS[key]
    miner.thresh, miner.n = thresh, n
    x = torch.from_numpy(qa).to(device)
    y = x if qb is qa else torch.from_numpy(qb).to(device)
    with torch.inference_mode():
        return miner.candidates(x, y, r, c)


def exact_pairs(clip_rows, dino_rows, i, j, clip_min: float, dino_max: float):
    """(i, j, clip_sim, dino_sim) of the candidates that pass both thresholds, exactly as find_pairs'
    re-check: simsearch.pair_sims over the rows fetched by clip_rows(rows) / dino_rows(rows) (sorted
    unique row numbers -> their float32 rows), so the sims are the same bits."""
    def sims(fetch, i, j):
        uniq = np.unique(np.concatenate([i, j]))
        x = fetch(uniq)
        return pair_sims(x, np.searchsorted(uniq, i), np.searchsorted(uniq, j))

    c = sims(clip_rows, i, j) if len(i) else np.empty(0)
    keep = c >= clip_min
    i, j, c = i[keep], j[keep], c[keep]
    d = sims(dino_rows, i, j) if len(i) else np.empty(0)
    keep = d <= dino_max
    return i[keep], j[keep], c[keep], d[keep]
