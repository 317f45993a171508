"""One block on one device: the integer (or float32) products of two row blocks (of the upper triangle, or
of a rectangle: BlockMiner.search's upper), the pairs whose product reaches the fast pass's threshold
(candidates), and their exact re-check (BlockMiner). On a CPU the products come in cache-sized pieces, none
below the diagonal, those that reach it in strips; a piece that vhmine.mine.join.prune rules out is never
computed. find_pairs runs every block through it in one process (vhmine.mine.join.band), vhmine.mine.join.blocks
one tile per Ray task. Reads the tensors it is given; writes nothing.
"""

from __future__ import annotations

import math

import numpy as np

from vhmine.mine.join.calibrate import choose
from vhmine.mine.join.kernels import Kernel, _same
from vhmine.mine.join.quantise import qmax_for
from vhmine.mine.join.recheck import _screened_recheck

_SEG = 64  # columns per segment in the two-level candidate search; divides ALIGN; a power of 2
_SEG_BITS = _SEG.bit_length() - 1
_ROWS, _COLS = 1024, 1024  # a CPU's products come in pieces of this many rows by columns (4 MiB of int32:
# at N = 50,000 on a 2-core EPYC, 2048 x 1024 pieces cost more: their products leave the cache before their search)


def _float_rows(torch) -> Kernel:
    """The benchmark's baseline: float32 rows as they are (not integers), float32 products."""
    return Kernel("float32-rows", "any", 0, "float32", _same, _same, lambda a, b, out: torch.mm(a, b.T, out=out))


def tiles(rows: int, block: int) -> list[tuple[int, int]]:
    """First rows of the (row block, column block) pairs of the upper triangle, column block >= row block."""
    starts = range(0, rows, block)
    return [(r, c) for r in starts for c in starts if c >= r]


def block_bytes(block: int, width: int) -> int:
    """Working memory of one block besides its candidates: the product (4 bytes a cell; on a CPU,
    which holds a _ROWS x _COLS piece of it at a time, an upper bound), the segment maxima and their
    mask, and a copy of both row blocks."""
    return math.ceil(4.25 * block * block) + 2 * block * width


_DIAG = 256  # rows of a strip where a CPU's piece reaches the diagonal (only its columns right of it computed)


_NONE = {t: (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, t)) for t in (np.int32, np.float32)}


class BlockMiner:
    """One block of the upper triangle on one device: the products of two row blocks, the pairs at or
    above the threshold (candidates), and their exact re-check (_screened_recheck). find_pairs runs
    every block in one process and vhmine.mine.join.blocks one tile per Ray task, through this same code.

    products="int8": rows are FastPass.q rows, thresh its integer threshold and sure, when given,
    FastPass.sure; the products are `kernel`'s (a vhmine.mine.join.kernels.Kernel, exact for rows within its
    levels) [default: the one calibrate.choose measures fastest here of those that keep qmax_for(width)
    levels exact]. products="float32": rows are
    float32 vectors and thresh a float one (the benchmark's baseline).
    """

    def __init__(
        self,
        clip,
        dino,
        clip_min,
        dino_max,
        thresh,
        n,
        *,
        device,
        block,
        width,
        products="int8",
        sure=None,
        norms=(None, None),
        span=None,
        chunk=None,
        cols=None,
        kernel: Kernel | None = None,
    ):
        import torch

        self.torch, self.device, self.thresh, self.n = torch, device, thresh, n
        self.clip, self.dino, self.clip_min, self.dino_max = clip, dino, clip_min, dino_max
        self.norms = norms  # bounds on the largest squared row norms of clip and dino, if known
        if products == "int8":
            # (by default for rows of quantise.qmax_for's full range: fast_pass's without a kernel's levels)
            self.kernel = kernel or choose(device, width, min_levels=qmax_for(width)).kernel
            self.sure = sure
        else:
            self.kernel, self.sure = _float_rows(torch), None
        dtype = getattr(torch, self.kernel.out)
        # search takes up to `span` rows against up to `block` [default: block]. A CPU computes their
        # products in pieces of `chunk` rows by `cols` columns [default: _ROWS by _COLS] and searches
        # each piece while it is still in cache (all at once, the products would go through memory
        # twice, and one core writes them out no faster than it computes them); a GPU computes and
        # searches them all at once.
        self.cpu = torch.device(device).type == "cpu"
        self.span = min(block, span or block)
        self.chunk = min(self.span, chunk or _ROWS) if self.cpu else self.span
        self.cols = min(block, cols or _COLS) if self.cpu else block
        self.buf = torch.empty(self.chunk * self.cols, dtype=dtype, device=device)  # reused: no page faults
        self.maxima = torch.empty(self.chunk * self.cols // _SEG, dtype=dtype, device=device)
        self.dtype = np.int32 if dtype == torch.int32 else np.float32
        # the views of a whole piece, made once (a piece's own would cost more Python than its search)
        self.out = self.buf.view(self.chunk, self.cols)
        self.segs = self.out.view(self.chunk, -1, _SEG)
        self.maxima_out = self.maxima.view(self.chunk, -1)
        if self.cpu:
            self.out_np, self.maxima_np = self.buf.numpy(), self.maxima.numpy()

    def candidates(self, x, y, r: int, c: int) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (i, j), i < j < n, of rows r + row of x and c + row of y whose product reaches thresh."""
        i, j, _ = self.search(x, y, r, c)
        return i, j

    def search(
        self, x, y, r: int, c: int, *, skip=None, upper: bool = True, rows_end: int | None = None, cols_end=None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """candidates, and their products: rows i = r + (row of x) and j = c + (row of y) with i < j (upper;
        else any), i < rows_end [default: any] and j < cols_end [default: n]. skip(row, rows, col, cols),
        when given: True for a piece (those rows by those columns, numbered as i and j) that provably holds
        no product at or above thresh (vhmine.mine.join.prune); it is not computed."""
        parts = []
        ends = (upper, math.inf if rows_end is None else rows_end, self.n if cols_end is None else cols_end)
        xk = self.kernel.left(x)  # the kernel's operands, converted once for all pieces
        for c0 in range(0, len(y), self.cols):
            col, ny = c + c0, min(self.cols, len(y) - c0)
            if (upper and col + ny <= r) or col >= ends[2]:  # columns all left of the first row (j < i), or padding
                continue
            y0 = y[c0 : c0 + ny]
            yk = self.kernel.right(y0)
            for s in range(0, len(x), self.chunk):
                row, nx = r + s, min(self.chunk, len(x) - s)
                if (upper and col + ny <= row) or row >= ends[1] or (skip is not None and skip(row, nx, col, ny)):
                    continue  # below the diagonal, padding, or pruned
                if self.cpu and row + nx > ends[1]:  # its last rows are padding: a CPU's kernels take any
                    nx = int(ends[1]) - row  # count of rows (a band's 2,000 new rows pad to 2,048: 2% of its products)
                if upper and row + nx > col and self.cpu and nx > _DIAG:  # it reaches the diagonal: its rows
                    for t in range(0, nx, _DIAG):  # in strips whose columns start at their first row's group
                        cut = max(0, (row + t - col) // _SEG * _SEG)
                        if cut < ny:
                            piece = xk[s + t : s + min(t + _DIAG, nx)]
                            yt = self.kernel.right(y0[cut:]) if cut else yk
                            self._piece(piece, yt, ny - cut, row + t, col + cut, parts)
                else:
                    self._piece(xk[s : s + nx], yk, ny, row, col, parts)
        return self._numbered(parts, ends)

    def _numbered(self, parts: list, ends) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pieces' candidates (flat index in the piece, product, piece's r, c, columns) as rows (i, j) and
        products, in one pass for all the pieces of a search (per piece, the index work would cost more Python
        than its numpy); ends: search's (upper, rows_end, cols_end)."""
        if not parts:
            return _NONE[self.dtype]
        flat, vals, r, c, ny = zip(*parts)
        count = [len(a) for a in flat]
        if len(parts) == 1:
            flat, ny, r, c = flat[0].astype(np.int64), ny[0], r[0], c[0]
            vals = vals[0]
        else:
            flat = np.concatenate(flat, dtype=np.int64)
            ny, r, c = (np.repeat(np.asarray(a, np.int64), count) for a in (ny, r, c))
            vals = np.concatenate(vals)
        i, j = np.divmod(flat, ny)
        i += r
        j += c
        upper, rows_end, cols_end = ends
        keep = j < cols_end
        if rows_end < math.inf:
            keep &= i < rows_end
        if upper:
            keep &= i < j
        return (i, j, vals) if keep.all() else (i[keep], j[keep], vals[keep])

    def _piece(self, x, y, ny: int, r: int, c: int, parts: list) -> None:
        """The candidates among the products of rows r.. (x) and the ny rows c.. (y), one piece: appended to
        parts as (flat index in the piece, product, r, c, ny) for _numbered."""
        torch, thresh, nx = self.torch, self.thresh, len(x)
        full = nx == self.chunk and ny == self.cols
        out = self.out if full else self.buf[: nx * ny].view(nx, ny)
        prod = self.kernel.mm(x, y, out)
        # Two levels: segment maxima read the products once on the device, and only segments holding a
        # candidate come back to be compared element-wise (a compare + nonzero over all of them costs
        # twice the int8 matmul on CPU). The small index work is numpy's: no thread-pool stalls.
        if full and prod is out:
            torch.amax(self.segs, 2, out=self.maxima_out)
            g = np.flatnonzero(self.maxima_np >= thresh)
        else:
            m = torch.amax(prod.view(nx, -1, _SEG), 2, out=self.maxima[: nx * ny // _SEG].view(nx, -1))
            g = np.flatnonzero(m.cpu().numpy() >= thresh)
        if not len(g):
            return
        if self.cpu:  # numpy's gather, on the same memory: no thread pool to wait for
            hits = (self.out_np if full and prod is out else prod.numpy()).reshape(-1, _SEG)[g]
        else:
            hits = prod.view(-1, _SEG)[torch.from_numpy(g).to(self.device)].cpu().numpy()
        # (flat indices and shifts: np.nonzero's two index arrays cost 3x more at a piece's ~100 segments)
        flat = np.flatnonzero(hits >= thresh)
        parts.append(((g[flat >> _SEG_BITS] << _SEG_BITS) | (flat & (_SEG - 1)), hits.ravel()[flat], r, c, ny))

    def recheck(self, i, j, products=None):
        """The candidates (i, j) that pass, exactly: (i, j, clip_sim, dino_sim). products: their
        products from search, which spare the CLIP re-check of those at or above `sure`."""
        sure = None if products is None or self.sure is None else products >= self.sure
        return _screened_recheck(self.clip, self.dino, i, j, self.clip_min, self.dino_max, sure, self.norms)
