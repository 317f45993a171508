"""The shapes of a `vhmine mine --engine ray` job: which tiles it has, and what each tile covers. Pure
bookkeeping on the driver (a few numbers per shape, the new rows for a band); reads and writes nothing.

- Triangle(rows, side): every pair i < j of one index, tile (row block, column block >= row block),
  numbered row by row over the upper triangle;
- Band(n, side, new_rows): every pair of one index that touches a new row, once: tile (chunk a of `side`
  new rows, column block b of `side` rows over all n rows), numbered a * blocks + b. A tile keeps pairs
  (i, j), i from its chunk, j from its block, i != j and (j not new or i < j); i < j is not implied;
- Rectangle(n_a, n_b, side): every pair (row of A, row of B) of two indexes, tile (row block of A, row
  block of B), numbered a * blocks_b + b.

`tile(k)` is what a task needs (a Tile: mine.ray.tiletask.mine_tile reads its rows from it); `record()` goes
into the job's identity, so a job folder made for another shape or other new rows starts over.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tile:
    """One tile: its kind, the first row r of its row block (a Band: the position of its chunk in the new
    rows) and c of its column block (a Rectangle: of B); a Band's tile also carries the row numbers of
    its chunk (x_rows) and the new rows inside its column block (new_cols)."""

    kind: str
    r: int
    c: int
    x_rows: np.ndarray | None = None
    new_cols: np.ndarray | None = None

    def band_pairs(self, i: np.ndarray, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A Band tile's pairs (lo, hi), lo < hi, of its candidates: row i of its chunk, j of its block. A
        pair of two new rows comes from the chunk of its smaller row only, so that over all tiles every
        pair touching a new row is kept once."""
        keep = (i != j) & ((i < j) | ~np.isin(j, self.new_cols))
        return np.minimum(i[keep], j[keep]), np.maximum(i[keep], j[keep])

    def where(self) -> str:
        """The tile in words, for a message."""
        if self.kind == "band":
            return f"{len(self.x_rows):,} new rows from row {int(self.x_rows[0]):,} against rows {self.c:,} on"
        if self.kind == "rectangle":
            return f"rows {self.r:,} of the first index and {self.c:,} of the second"
        return f"rows {self.r:,} and {self.c:,}"


class Triangle:
    """The tiles of the upper triangle of `blocks` x `blocks` row blocks of `side` rows, row by row."""

    kind = "triangle"

    def __init__(self, rows: int, side: int):
        self.n, self.side = int(rows), side
        self.blocks = -(-rows // side) if rows else 0
        t = self.blocks
        self.starts = np.array([a * t - a * (a - 1) // 2 for a in range(t + 1)], np.int64)  # first tile of row a

    def __len__(self) -> int:
        return int(self.starts[-1])

    def tile_at(self, k: int) -> tuple[int, int]:
        """First rows (r, c) of tile k."""
        a = int(np.searchsorted(self.starts, k, "right")) - 1
        return a * self.side, (a + int(k - self.starts[a])) * self.side

    def tile(self, k: int) -> Tile:
        return Tile("triangle", *self.tile_at(k))

    def record(self) -> dict:
        return {"kind": "triangle", "rows": self.n, "side": self.side}


def new_rows_array(new_rows, n: int) -> np.ndarray:
    """new_rows as a sorted unique int64 array of row numbers in [0, n); ValueError otherwise."""
    arr = np.unique(np.asarray(new_rows, dtype=np.int64).ravel())
    if len(arr) and (arr[0] < 0 or arr[-1] >= n):
        raise ValueError(f"new rows must lie in [0, {n}), got {int(arr[0])} to {int(arr[-1])}")
    return arr


class Band:
    """The tiles of the pairs that touch a new row: chunks of `side` new rows x column blocks of all n rows."""

    kind = "band"

    def __init__(self, n: int, side: int, new_rows):
        self.n, self.side = int(n), side
        self.new_rows = new_rows_array(new_rows, self.n)
        self.blocks = -(-self.n // side) if self.n else 0
        self.chunks = -(-len(self.new_rows) // side)

    def __len__(self) -> int:
        return self.chunks * self.blocks

    def tile(self, k: int) -> Tile:
        a, b = divmod(int(k), self.blocks)
        c = b * self.side
        lo, hi = np.searchsorted(self.new_rows, [c, c + self.side])
        return Tile("band", a * self.side, c, self.new_rows[a * self.side : (a + 1) * self.side], self.new_rows[lo:hi])

    def record(self) -> dict:
        return {
            "kind": "band",
            "rows": self.n,
            "side": self.side,
            "new_rows": len(self.new_rows),
            "new_rows_sha256": hashlib.sha256(self.new_rows.astype("<i8").tobytes()).hexdigest(),
        }


class Rectangle:
    """The tiles of every pair (row of A, row of B): row blocks of A x row blocks of B, row by row."""

    kind = "rectangle"

    def __init__(self, n_a: int, n_b: int, side: int):
        self.n_a, self.n_b, self.side = int(n_a), int(n_b), side
        self.blocks_a, self.blocks_b = -(-self.n_a // side), -(-self.n_b // side)
        self.blocks = self.blocks_b

    def __len__(self) -> int:
        return self.blocks_a * self.blocks_b

    def tile(self, k: int) -> Tile:
        a, b = divmod(int(k), self.blocks_b)
        return Tile("rectangle", a * self.side, b * self.side)

    def record(self) -> dict:
        return {"kind": "rectangle", "rows_a": self.n_a, "rows_b": self.n_b, "side": self.side}
