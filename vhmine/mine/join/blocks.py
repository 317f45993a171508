"""One tile of the exact join from its two row blocks, each quantised with parameters recorded once
for the whole collection: what a task of `vhmine mine --engine ray` computes. Pure computation: it
reads the arrays it is given (tiletask reads them from the index by row range) and writes nothing.

The quantisation is fast_pass's, through the same functions of vhmine.mine.join.quantise: rows z (z = the
Spread of the dominant dimensions, when the turn is on, else x) become integers q in [-qmax, qmax] with
z ~ scale * q. Here the turn is chosen on the driver from fast_pass's even sample of rows (choose_turn),
and the scale from one streaming pass over every row (`scan_block` per row chunk, merged by
`Quantiser.from_scan`), before any tile starts: so every block is quantised the same way, in whichever
tile and on whichever node it is. quantise._quantise's error bound is measured per block
(quantise.ChunkStats, combined by max, so the bound of a tile covers both its blocks), and each tile's
integer threshold follows from its two blocks' stats (quantise.thresholds): it provably reaches every
pair at or above clip_min. Candidates get the float64 re-check through recheck.pair_sims, so a tile's
pairs are bit for bit those of find_pairs.

Also the quantisation of a whole shape for search (`quantise_shape`): fast_pass over every row, or for a band
the new rows with an earlier join's Quantiser (`reusable` says when it can be), as quantise.Quantised.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from vhmine.errors import InputError
from vhmine.mine.join.band import others
from vhmine.mine.join.products import BlockMiner
from vhmine.mine.join.quantise import (
    ALIGN,
    ChunkStats,
    FastPass,
    Quantised,
    choose_turn,
    chunk_rows,
    error_bound,
    fast_pass,
    largest,
    qmax_for,
    quantise_chunk,
    sample_rows,
    scale_for,
    spread,
    thresholds,
    turned,
)
from vhmine.mine.join.recheck import pair_sims

log = logging.getLogger("vhmine.mine.join.simsearch")  # (search's: the lines a join logs come from one name)

__all__ = [
    "BlockStats",
    "Quantiser",
    "choose_turn",
    "cross_candidates",
    "exact_pairs",
    "quantise_block",
    "sample_rows",
    "scan_block",
    "threshold",
    "tile_candidates",
]

BlockStats = ChunkStats  # a block's stats: those of its chunks, combined


@dataclass(frozen=True)
class Quantiser:
    """How every block is quantised: the scale, the levels and the dimensions the turn spreads (none:
    the rows are quantised as they are)."""

    dim: int
    scale: float
    qmax: int
    dims: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple(int(k) for k in self.dims))  # (from job.json: a list)

    @property
    def rotated(self) -> bool:
        return bool(self.dims)

    @property
    def turn(self):
        return spread(self.dim, self.dims) if self.dims else None

    @classmethod
    def from_scan(cls, dim: int, amax: float, dims: tuple[int, ...] = (), levels: int | None = None):
        """The quantiser whose scale follows amax, the largest turned component over every row (the
        merged scan_block of every chunk, turned by `dims`). levels: at most this many quantisation
        levels (the fewest that the nodes' products kernels keep exact) [default: qmax_for(dim)]."""
        qmax = qmax_for(dim) if levels is None else max(1, min(int(levels), qmax_for(dim)))
        return cls(dim, scale_for(amax, qmax), qmax, tuple(dims))

    def as_dict(self) -> dict:
        return {
            "dim": self.dim,
            "scale": self.scale,
            "qmax": self.qmax,
            "dims": list(self.dims),
            "rotated": self.rotated,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Quantiser | None:
        """The recorded quantiser, or None when it was recorded by an older vhmine (then scan again: a
        finished tile's pairs are exact whichever quantiser found them)."""
        if "dims" not in d:
            return None
        return cls(int(d["dim"]), float(d["scale"]), int(d["qmax"]), tuple(d["dims"]))


def scan_block(x: np.ndarray, dims: tuple[int, ...] = ()) -> float:
    """The streaming pass over one chunk of rows: their largest component, turned by `dims`."""
    turn, step = (spread(x.shape[1], tuple(dims)) if dims else None), chunk_rows(x.shape[1])
    return max((largest(turned(x[s : s + step], turn)) for s in range(0, len(x), step)), default=0.0)


def quantise_block(x: np.ndarray, qz: Quantiser) -> tuple[np.ndarray, ChunkStats]:
    """Rows x as int8 rows (zero-padded to a multiple of 64 rows and of 8 columns: no product changes),
    and the block's stats: fast_pass's chunks, with the recorded scale."""
    n, d = x.shape
    turn, step = qz.turn, chunk_rows(d)
    q = np.zeros((-(-max(n, 1) // ALIGN) * ALIGN, -(-d // 8) * 8), np.int8)
    stats = ChunkStats()
    for s in range(0, n, step):
        xc = x[s : s + step]
        stats = stats | quantise_chunk(xc, turned(xc, turn), qz.scale, qz.qmax, q[s : s + step])
    return q, stats


def threshold(qz: Quantiser, stats: ChunkStats, clip_min: float) -> tuple[int, float]:
    """(integer threshold, error bound) for pairs of rows the stats cover: every pair with float64 sim
    >= clip_min reaches the threshold (fast_pass's bound and rounding allowance)."""
    thresh, _, err = thresholds_of(qz, stats, clip_min)
    return thresh, err


def thresholds_of(qz: Quantiser, stats: ChunkStats, clip_min: float) -> tuple[int, int, float]:
    """(thresh, sure, error bound) for pairs of rows the stats cover (quantise.thresholds)."""
    err, norm2 = error_bound(stats, qz.scale, qz.dim, qz.turn)
    thresh, sure = thresholds(clip_min, err, norm2, qz.scale, qz.dim, qz.qmax)
    return thresh, sure, err


_MINERS: dict = {}  # (device, block, width, kernel) -> BlockMiner: its product buffer is reused from tile to tile


def tile_kernel(device, width: int, levels: int, kernel: str | None = None):
    """This node's products kernel (a calibrate.Choice) for rows of `levels` quantisation levels: `kernel`
    when named, else the fastest exact one measured here (calibrated once per node, then cached)."""
    from vhmine.mine.join.calibrate import choose

    return choose(device, width, kernel=kernel, min_levels=levels)


def tile_candidates(
    qa,
    qb,
    r: int,
    c: int,
    thresh: int,
    n: int,
    *,
    device,
    block: int,
    levels: int | None = None,
    kernel: str | None = None,
    ordered=None,
    account: dict | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Rows (i, j), i < j < n, of the tile (row block at r, column block at c >= r) whose integer product
    reaches thresh; qa and qb are quantise_block's rows (qb is qa on the diagonal), of `levels` levels
    (Quantiser.qmax) [default: the largest |q| in them]. kernel: see tile_kernel. ordered: the two blocks
    as prune.sort_block put them (pruned: the pieces prune.tile_skip rules out are not multiplied); account,
    when given, gets the products the pruning was asked about and those it skipped."""
    import torch

    if levels is None:
        levels = max(int(np.abs(q.astype(np.int16)).max(initial=0)) for q in (qa, qb))
    choice = tile_kernel(torch.device(device), qa.shape[1], levels, kernel)
    key = (str(device), block, qa.shape[1], choice.name)
    if key not in _MINERS:
        _MINERS.clear()  # one buffer per worker
        _MINERS[key] = BlockMiner(
            None,
            None,
            0.0,
            0.0,
            thresh,
            n,
            device=torch.device(device),
            block=block,
            width=qa.shape[1],
            kernel=choice.kernel,
        )
    miner = _MINERS[key]
    miner.thresh, miner.n = thresh, n
    skip = None
    if ordered is not None:
        from vhmine.mine.join.prune import tile_skip

        (sa, sb), same = ordered, qb is qa
        qa, qb = sa.q, (sa.q if same else sb.q)
        skip = tile_skip(sa, sb, thresh, choice.kernel, device, r, c)
    x = torch.from_numpy(qa).to(device)
    y = x if qb is qa else torch.from_numpy(qb).to(device)
    with torch.inference_mode():
        if ordered is None:
            return miner.candidates(x, y, r, c)
        # positions in the ordered blocks: p < q covers each pair of a diagonal tile once, its rows either way
        i, j, _ = miner.search(x, y, r, c, skip=skip, rows_end=r + len(sa.order), cols_end=c + len(sb.order))
    if account is not None:
        account.update(asked=skip.asked, skipped=skip.skipped)
    i, j = r + sa.order[i - r], c + sb.order[j - c]
    return np.minimum(i, j), np.maximum(i, j)


def cross_candidates(
    qa,
    qb,
    na: int,
    nb: int,
    thresh: int,
    *,
    device,
    block: int,
    levels: int | None = None,
    kernel: str | None = None,
    ordered=None,
    account: dict | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Every (p, q), p < na rows of qa and q < nb rows of qb, whose integer product reaches thresh: a
    tile of the rectangle (or band) whose two blocks are any rows, not a triangle's (no i < j cut); p, q
    are positions in the blocks. Arguments as tile_candidates'."""
    # tile_candidates keeps i < j < n of rows r + p and c + q: with r = -len(qa) every p comes before
    # every q, so only the padding of qb (q >= nb) is cut; the padding of qa is cut here
    kw = dict(device=device, block=block, levels=levels, kernel=kernel, ordered=ordered, account=account)
    i, j = tile_candidates(qa, qb, -len(qa), 0, thresh, nb, **kw)
    p = i + len(qa)
    keep = p < na
    return p[keep], j[keep]


def exact_pairs(clip_rows, dino_rows, i, j, clip_min: float, dino_max: float, clip_rows_b=None, dino_rows_b=None):
    """(i, j, clip_sim, dino_sim) of the candidates that pass both thresholds, exactly as find_pairs'
    re-check: recheck.pair_sims over the rows fetched by clip_rows(rows) / dino_rows(rows) (sorted
    unique row numbers -> their float32 rows), so the sims are the same bits. clip_rows_b, dino_rows_b:
    j are rows of another index, fetched by these (a rectangle's pairs)."""

    def sims(fetch, fetch_b, i, j):
        if fetch_b is None:
            uniq = np.unique(np.concatenate([i, j]))
            return pair_sims(fetch(uniq), np.searchsorted(uniq, i), np.searchsorted(uniq, j))
        ui, uj = np.unique(i), np.unique(j)  # both sides' rows in one array: a pair's bits are its two rows'
        x = np.concatenate([fetch(ui), fetch_b(uj)])
        return pair_sims(x, np.searchsorted(ui, i), len(ui) + np.searchsorted(uj, j))

    c = sims(clip_rows, clip_rows_b, i, j) if len(i) else np.empty(0)
    keep = c >= clip_min
    i, j, c = i[keep], j[keep], c[keep]
    d = sims(dino_rows, dino_rows_b, i, j) if len(i) else np.empty(0)
    keep = d <= dino_max
    return i[keep], j[keep], c[keep], d[keep]


def reusable(kept: FastPass | None, clip, new_rows, rotate, levels: int) -> str:
    """Why an earlier join's quantisation of the rows other than new_rows cannot be reused here ("" if it
    can): for a band only, of those very rows (their count and width), with levels the kernel keeps exact,
    turned as `rotate` asks."""
    if kept is None:
        return "none kept"
    n, d = clip.shape
    if kept.n != n - len(new_rows) or kept.q.shape[1] != -(-d // 8) * 8:
        raise InputError(
            f"quantised holds {kept.n:,} rows of width {kept.q.shape[1]}, not the {n - len(new_rows):,} rows "
            f"other than new_rows of width {d}: give the earlier join's quantisation of exactly those rows"
        )
    if kept.qmax > levels:
        return f"its {kept.qmax} levels are more than this products kernel keeps exact ({levels})"
    if rotate is not None and bool(kept.dims) != bool(rotate):
        return f"it was {'' if kept.dims else 'not '}turned, and rotate={rotate} asks otherwise"
    return ""


def quantise_shape(clip, shape, clip_min: float, rotate, levels: int, pool, kept) -> Quantised:
    """The shape's (search.Shape's) quantisation: all rows (fast_pass), or for a band with an earlier join's
    quantisation of the other rows (kept, reusable), only the new rows with that same quantiser; the thresholds
    follow from the error measures of every row either way (thresholds_of), so the search stays exact."""
    why = reusable(kept, clip, shape.new_rows, rotate, levels) if shape.kind == "band" else "not a band"
    if why:
        if kept is not None:
            log.info("the kept quantisation is not reused: %s", why)
        fp = fast_pass(clip, clip_min, rotate, workers=pool, qmax=levels)
        return Quantised(fp.thresh, fp.sure, fp.margin, fp.rotated, fp=fp)
    qz = Quantiser(clip.shape[1], kept.scale, kept.qmax, kept.dims)
    old = others(len(clip), shape.new_rows)
    at = np.linspace(0, len(old) - 1, min(len(old), 64)).astype(np.int64)
    q_at, _ = quantise_block(clip[old[at]], qz)  # a guard against another collection's quantisation (a turned
    if np.abs(q_at[: len(at)].astype(np.int16) - kept.q[at]).max(initial=0) > 1:  # row may round 1 apart)
        raise InputError(
            "quantised does not match these rows (its quantisation of a sample of them differs): give the earlier "
            "join's quantisation of the same rows, or none"
        )
    new_q, new_stats = quantise_block(clip[shape.new_rows], qz)
    thresh, sure, err = thresholds_of(qz, kept.stats | new_stats, clip_min)
    return Quantised(thresh, sure, err, bool(kept.dims), new_q=new_q, kept=kept)
