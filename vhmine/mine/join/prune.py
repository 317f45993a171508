"""Exact pruning before the products: pieces of the products that provably hold no candidate are never
multiplied. Reads the quantised rows it is given; writes nothing.

The bound is on the integer products of the fast pass (quantise), so pruning never changes the candidates:
rows are put in an order where similar rows sit together (each row to the nearest of a few centres found
on a sample, the centres in a chain of near neighbours), and cut into groups of GROUP rows; a group g gets
a centre c_g (the mean of its integer rows, in float64) and a radius R_g (the largest |q - c_g|). For rows
x of group a and y of group b, x.y = c_a.c_b + c_a.(y - c_b) + (x - c_a).c_b + (x - c_a).(y - c_b) <=
c_a.c_b + |c_a| R_b + R_a |c_b| + R_a R_b, raised by a bound on float64's rounding of it (`bounds`). A piece
(rows by columns) whose every group pair is bounded below the integer threshold holds no product that
reaches it: it is skipped (products.BlockMiner.search's skip), and the candidates are those of the search
without pruning, one for one.

Whether it pays depends on the rows: a group's radius must be well below its centre's length, as in a
collection of many near-duplicate families, and not in one whose rows share a large common direction and
scatter around it (CLIP's embeddings: docs/mine.md gives the figures). So it is chosen by measurement, per
run (`choose`): on an even sample of the quantised rows, the share of products that groups of the sample
would skip; only when that share's products cost more than ordering the rows is the full mine pruned. The
Ray engine orders each tile's two blocks the same way (block_order, tile_skip: vhmine.mine.join.blocks).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from vhmine.mine.join.band import Part, gather, up
from vhmine.mine.join.quantise import sample_rows

GROUP = 256  # rows a group's centre and radius bound (pieces are skipped when all their groups' bounds allow)
MAX_CENTRES = 1024  # centres the rows are ordered by, at most
_U64 = 2.0**-53


def kmeans(rows: np.ndarray, k: int, iters: int = 4, seed: int = 0) -> np.ndarray:
    """k unit centres (float32) of rows' directions, in a chain of near neighbours (spherical k-means from k
    seeded rows; any centres give exact bounds: they only decide the order)."""
    x = rows.astype(np.float32)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)
    k = max(1, min(k, len(x)))
    c = x[np.random.default_rng(seed).choice(len(x), k, replace=False)]
    for _ in range(iters):
        label = np.argmax(x @ c.T, axis=1)
        order = np.argsort(label, kind="stable")
        first = np.searchsorted(label[order], np.arange(k))
        sums = np.add.reduceat(np.concatenate([x[order], np.zeros((1, x.shape[1]), x.dtype)]), first, axis=0)
        sums[np.bincount(label, minlength=k) == 0] = 0  # (reduceat gives an empty centre a row: it keeps its own)
        norm = np.linalg.norm(sums, axis=1, keepdims=True)
        c = np.where(norm > 0, sums / np.maximum(norm, 1e-30), c)
    return c[chain(c)]


def chain(c: np.ndarray) -> np.ndarray:
    """An order of the centres in which each is the nearest unvisited one to the one before (so groups
    next to each other in the rows' order are alike)."""
    sim = c @ c.T
    left, path = np.ones(len(c), bool), [0]
    left[0] = False
    for _ in range(len(c) - 1):
        s = np.where(left, sim[path[-1]], -np.inf)
        path.append(int(np.argmax(s)))
        left[path[-1]] = False
    return np.array(path, np.int64)


def int_centres(c: np.ndarray) -> np.ndarray:
    """Centres as int8 rows (their directions, to 127 levels): what rows are assigned by, with the products
    kernel."""
    scale = 127.0 / max(float(np.abs(c).max()), 1e-300)
    return np.rint(c * scale).astype(np.int8)


def assign(q, centres8: np.ndarray, kernel, device, chunk: int = 8192) -> np.ndarray:
    """Each quantised row's nearest centre (largest integer product with centres8), by the products kernel."""
    import torch

    cen = torch.from_numpy(np.ascontiguousarray(centres8)).to(device)
    right = kernel.right(cen)
    labels = []
    for s in range(0, len(q), chunk):
        x = q[s : s + chunk] if isinstance(q, torch.Tensor) else torch.from_numpy(q[s : s + chunk]).to(device)
        out = torch.empty(len(x), len(cen), dtype=getattr(torch, kernel.out), device=device)
        prod = kernel.mm(kernel.left(x), right, out)
        labels.append(torch.argmax(prod, dim=1).cpu().numpy())
    return np.concatenate(labels) if labels else np.zeros(0, np.int64)


@dataclass(frozen=True, eq=False)
class Groups:
    """Consecutive groups of `size` rows of n integer rows: their centres as integers c8 times `scale` plus
    a remainder of length at most `rest` (float64, raised to cover rounding), each group's radius around its
    exact centre (raised), and every row's length (raised)."""

    size: int
    n: int
    c8: np.ndarray
    scale: float
    rest: np.ndarray
    radius: np.ndarray
    length: np.ndarray


def _raised_sqrt(v: np.ndarray, terms: int) -> np.ndarray:
    """sqrt of float64 sums of `terms` rounded squares, raised past every rounding (theirs and sqrt's)."""
    return np.sqrt(v / (1 - (terms + 4) * _U64)) * (1 + 4 * _U64)


def group_stats(q: np.ndarray, n: int, size: int | None = None) -> Groups:
    """The Groups of the first n rows of q (integer rows, zero rows after n), of `size` rows [default: GROUP]."""
    size = size or GROUP
    w, ng = q.shape[1], -(-n // size)
    centre, radius = np.zeros((ng, w)), np.zeros(ng)
    length = np.zeros(n)
    for g in range(ng):
        rows = q[g * size : min((g + 1) * size, n)].astype(np.float64)
        length[g * size : g * size + len(rows)] = np.einsum("ij,ij->i", rows, rows)  # integers: exact
        centre[g] = rows.sum(axis=0) / len(rows)  # any centre bounds exactly: its radius is measured from it
        rows -= centre[g]
        radius[g] = float(np.einsum("ij,ij->i", rows, rows).max())
    scale = max(float(np.abs(centre).max()), 1e-300) / 127
    c8 = np.clip(np.rint(centre / scale), -127, 127).astype(np.int8)
    rest = centre - c8 * scale  # (scale * c8 is exact: an integer times a float64 below 2^7)
    return Groups(
        size,
        n,
        c8,
        scale,
        _raised_sqrt(np.einsum("ij,ij->i", rest, rest), w),
        _raised_sqrt(radius, w),
        np.sqrt(length) * (1 + 4 * _U64),
    )


def bounds(rows: Groups, cols: Groups, q_rows, kernel, device, chunk: int = 8192) -> np.ndarray:
    """bound[a, b] >= every integer product of a row x of group a (of rows) with a row y of group b (of
    cols): x.y = x.c_b + x.(y - c_b) <= scale x.c8_b + |x| (rest_b + radius_b), the largest over x in a (x.c8_b
    exact, by the products kernel); q_rows: rows' integer rows, as the kernel takes them."""
    import torch

    right = kernel.right(torch.from_numpy(cols.c8).to(device))
    reach = cols.rest + cols.radius
    g, ng = rows.size, -(-rows.n // rows.size)
    out = np.empty((ng, len(cols.c8)))
    step = max(1, chunk // g) * g
    for s in range(0, rows.n, step):
        e = min(s + step, rows.n)
        prod = torch.empty(e - s, len(cols.c8), dtype=getattr(torch, kernel.out), device=device)
        v = kernel.mm(kernel.left(q_rows[s:e]), right, prod).cpu().numpy().astype(np.float64)
        v *= cols.scale
        v += rows.length[s:e, None] * reach[None, :]
        if (e - s) % g:  # a last group short of g rows: the others' maxima are over rows of their own
            v = np.concatenate([v, np.full(((-(e - s)) % g, v.shape[1]), -np.inf)])
        out[s // g : -(-e // g)] = v.reshape(-1, g, v.shape[1]).max(axis=1)
    # each value a sum of two products, rounded three times (the max is exact): raised by that, and room
    return out + 4 * _U64 * np.abs(out) + 1e-6


class Skip:
    """skip(row, rows, col, cols) for BlockMiner.search: True when every group pair the piece covers is
    bounded below thresh. Counts the products it was asked about and those it skipped (threads share it)."""

    def __init__(self, low: np.ndarray, size: int, row0: int = 0, col0: int = 0):
        self.low, self.size, self.row0, self.col0 = low, size, row0, col0
        self.asked = self.skipped = 0
        self._lock = threading.Lock()

    def __call__(self, row: int, rows: int, col: int, cols: int) -> bool:
        r, c, g = row - self.row0, col - self.col0, self.size
        out = bool(self.low[r // g : (r + rows - 1) // g + 1, c // g : (c + cols - 1) // g + 1].all())
        with self._lock:
            self.asked += rows * cols
            self.skipped += rows * cols if out else 0
        return out


def sample_share(
    sample: np.ndarray, n: int, centres: np.ndarray, thresh: int, piece: int = 1024, side: int | None = None
) -> float:
    """The share of products a pruned search of n rows would skip, as measured on an even sample of them
    (quantised rows, in row order): the sample's rows put in the order (by nearest centre), cut into
    groups and pieces of as many rows as stand for GROUP and `piece` of the n, each group bounded as
    `bounds` does (in float64), and the products of the pieces whose every group pair falls below thresh
    counted. side: the rows are ordered within blocks of `side` rows (a Ray tile's), not all together:
    then each block's share of the sample is ordered and grouped on its own. An optimistic measure (a
    sample's group is tighter than the full one): a share near 0 says pruning cannot pay."""
    m = len(sample)
    block = (np.arange(m) * (n / m) // side).astype(np.int64) if side else np.zeros(m, np.int64)
    s = sample.astype(np.float32)
    s = s[np.lexsort((np.argmax(s @ centres.T, axis=1), block))]
    g, per = max(1, round(GROUP * m / n)), max(1, round(piece / GROUP))
    # groups of g rows, pieces of `per` groups, neither across a block's edge
    first = np.flatnonzero(np.r_[True, block[1:] != block[:-1]])
    starts = np.unique(np.concatenate([np.arange(f, e, g) for f, e in zip(first, np.r_[first[1:], len(s)])]))
    size = np.diff(np.append(starts, len(s)))
    cen = np.add.reduceat(s, starts, axis=0) / size[:, None]
    own = np.repeat(np.arange(len(starts)), size)
    rad = np.sqrt(np.maximum.reduceat(((s - cen[own]) ** 2).sum(axis=1), starts))
    # each row's bound on each group: its product with the centre plus its norm times the radius, the sum
    # formed in place a slice of rows at a time (no m x groups temporaries besides the product)
    t, norm = s @ cen.T, np.linalg.norm(s, axis=1)
    for i in range(0, len(t), 512):
        t[i : i + 512] += norm[i : i + 512, None] * rad[None, :]
    low = (np.maximum.reduceat(t, starts, axis=0) if len(starts) < len(t) else t) < thresh  # (groups of 1 row)
    del t
    low |= low.T.copy()  # min(b, b.T) < thresh
    gblock = block[starts]
    gfirst = np.flatnonzero(np.r_[True, gblock[1:] != gblock[:-1]])
    pstart = np.unique(np.concatenate([np.arange(f, e, per) for f, e in zip(gfirst, np.r_[gfirst[1:], len(starts)])]))
    skipped = np.logical_and.reduceat(np.logical_and.reduceat(low, pstart, axis=0), pstart, axis=1)
    rows = np.add.reduceat(size, pstart).astype(np.float64)
    area = np.outer(rows, rows)  # the pairs of two pieces (upper triangle) and of one piece (diagonal), in place
    for i in range(len(area)):
        area[i, : i + 1] = 0
    np.fill_diagonal(area, rows * (rows - 1) / 2)
    total = area.sum()
    area *= skipped
    return float(area.sum() / max(total, 1.0))


@dataclass(frozen=True, eq=False)
class Chosen:
    """What the search runs (parts), and the pruning's account: estimate (the sample's share, or None when
    not measured), skip (the Skip that ran, or None), chosen, why (one line)."""

    parts: list
    estimate: float | None
    chosen: bool
    why: str
    skip: Skip | None = None

    def skipped(self) -> float | None:
        """The share of the pieces' products skipped (None: not pruned)."""
        return None if self.skip is None else self.skip.skipped / max(self.skip.asked, 1)

    def record(self) -> dict:
        est = None if self.estimate is None else round(self.estimate, 6)
        done = self.skipped()
        return {"chosen": self.chosen, "sample_share": est, "skipped": None if done is None else round(done, 6)}

    def line(self) -> str:
        if self.chosen:
            return f"pruning: on ({self.why}); {100 * (self.skipped() or 0):.1f}% of the products skipped"
        return f"pruning: off ({self.why})"


@dataclass(frozen=True, eq=False)
class SortedBlock:
    """A block's quantised rows in the order (each row by its nearest centre), its padding after: q; order[p]
    is the block's own row at position p; its Groups."""

    q: np.ndarray
    order: np.ndarray
    groups: Groups


def sort_block(q: np.ndarray, n: int, centres8: np.ndarray, kernel, device) -> SortedBlock:
    """The first n rows of block q (quantise_block's) put in the order of centres8 (int_centres)."""
    label = assign(q[:n], centres8, kernel, device)
    order = np.argsort(label, kind="stable")
    out = np.zeros_like(q)
    out[: up(n)] = gather(q, order)
    return SortedBlock(out, order, group_stats(out, n))


def tile_skip(a: SortedBlock, b: SortedBlock, thresh: int, kernel, device, row0: int, col0: int) -> Skip:
    """The Skip of a tile whose rows are block a's (searched from row0) and columns block b's (from col0)."""
    import torch

    ab = bounds(a.groups, b.groups, torch.from_numpy(a.q).to(device), kernel, device)
    ba = ab.T if b is a else bounds(b.groups, a.groups, torch.from_numpy(b.q).to(device), kernel, device).T
    return Skip(np.minimum(ab, ba) < thresh, a.groups.size, row0, col0)


def tile_centres(sample_q: np.ndarray, rows: int, side: int, thresh: int, prune: bool | None, rate: float = 400.0):
    """The Ray engine's choice, on the driver: (int8 centres each tile's blocks are ordered by, or None;
    the record: chosen, sample_share, why). Each block of `side` rows is ordered by side / GROUP centres
    found on sample_q (quantised rows: an even sample of `rows` rows, in row order), measured as `choose`
    does, each block of the sample ordered on its own (rate: a products kernel's GMAC/s, nominal: the nodes
    measure their own)."""
    n, w = side, sample_q.shape[1]
    k = min(MAX_CENTRES, max(1, -(-n // GROUP)))
    if prune is False or not len(sample_q):
        return None, {"chosen": False, "sample_share": None, "why": "not asked"}
    centres = kmeans(sample_q, k, iters=3)
    share = sample_share(sample_q, rows, centres, thresh, side=side)
    gain = share * n * n * w / (rate * 1e9)  # (a tile off the diagonal: side x side products)
    cost = 2 * n * k * w / (rate * 1e9) + _COST_PER_VALUE * n * w
    if prune is None and (share < MIN_SHARE or not gain > PAYS * cost):
        return None, {"chosen": False, "sample_share": round(share, 6), "why": f"a sample says {100 * share:.1f}%"}
    return int_centres(centres), {"chosen": True, "sample_share": round(share, 6), "why": "asked" if prune else ""}


MIN_SHARE = 0.05  # below this share of skippable products, as a sample measures it, no pruning
PAYS = 1.5  # pruned only when the products it would skip cost this many times what ordering the rows does
_COST_PER_VALUE = 5e-9  # seconds per quantised value (n x width) to order the rows, gather them and group them


def choose(parts, qd, clip, shape, prune, choice, block, device) -> Chosen:
    """The parts to search, pruned or not: prune False never; True always (a full mine's triangle only);
    None when measured to pay: sample_share on 1,024 rows (a few milliseconds) must find at least MIN_SHARE of
    the products skippable, and a share whose products, at the kernel's measured rate, cost more than PAYS
    times what ordering and bounding the rows does."""
    import torch

    if prune is False:
        return Chosen(parts, None, False, "not asked")
    if shape.kind != "triangle" or not parts:
        return Chosen(parts, None, False, "only a full mine's triangle is pruned")
    n, q, thresh, w = parts[0].nx, qd.fp.q, qd.thresh, qd.fp.q.shape[1]
    k = min(MAX_CENTRES, max(1, -(-n // GROUP)))
    rate = (choice.rates.get(choice.name) or 100.0) * 1e9  # MAC/s in one thread
    share = None
    if prune is None:  # a first look: a few milliseconds
        from vhmine.mine.join import products

        first = q[sample_rows(n)[:: max(1, min(n, 4096) // 1024)]]
        piece = min(products._COLS, block)  # (a CPU's pieces; a GPU computes a block at a time)
        share = sample_share(first, n, kmeans(first, min(k, 32), iters=3), thresh, piece=piece)
        gain = share * n * n / 2 * w / rate
        cost = 2 * n * k * w / rate + _COST_PER_VALUE * n * w  # the assignment's and bounds' products; the rest
        if share < MIN_SHARE or not gain > PAYS * cost:
            few = "" if share < MIN_SHARE else ", too few to pay for the order here"
            why = f"a sample says {100 * share:.1f}% of the products could be skipped{few}"
            return Chosen(parts, share, False, why)
    centres = kmeans(q[sample_rows(n)[:: max(1, min(n, 4096) // (16 * k))]], k, iters=3)
    label = assign(parts[0].x, int_centres(centres), choice.kernel, device)
    order = np.argsort(label[:n], kind="stable")
    sorted_q = gather(q, order)
    groups = group_stats(sorted_q, n)
    x = torch.from_numpy(sorted_q).to(device)
    b = bounds(groups, groups, x, choice.kernel, device)
    skip = Skip(np.minimum(b, b.T) < thresh, groups.size)
    why = "asked" if prune else f"a sample said {100 * share:.1f}% of the products could be skipped"
    return Chosen([Part(x, x, n, n, True, order, order, skip=skip)], share, True, why, skip)
