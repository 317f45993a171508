"""The finished tiles of a ranked job (mine.ray.tilejob) merged into the run's pairs, in rank order, with
--max-per-image and --max-pairs applied, without any one process holding every pair.

Reads the tile files (each holds its in-box pairs in rank order, then a sample of the other CLIP-alike pairs);
writes only intermediate merge files under the job folder's `merge/` when there are more tiles than one pass
merges (FAN_IN), removed once read. Memory: FAN_IN x CHUNK rows, plus one entry per image that has a kept pair
when --max-per-image is given (the greedy cap needs that count).

The merge is exact: keys are (-gap, id_a, id_b, lo, hi), a total order equal to mine.rank.rank_pairs' (gap
descending, ties by image ids, then row order), and the greedy per-image cap visits pairs in that order as
rank_pairs does. Tiles can only pre-cut to their own top `max_pairs` when no per-image cap is given: with one,
a tile's later pairs may be needed once other tiles use up its images.

A rectangle with images in both indexes (`--against`) drops, before the ranking and the caps, the pairs
mine.join.shared.keep_across drops (shared_drops: read from every stored row of the tiles, which keep every
CLIP-alike pair; then `without` in the merged stream), as the local engine's rectangle
(mine.local_run.mine_across) does; its tiles do not pre-cut then (a tile's top list may lose pairs to the
rule). The images in both indexes are mine.idjoin.Across's.
"""

from __future__ import annotations

import bisect
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from vhmine.mine.ray.tilejob import NpyRows, rank_key, rank_order, write_npy

CHUNK = 8192  # rows read from each sorted input at a time
FAN_IN = 64  # inputs merged in one pass


def _merge_sorted(inputs: list, chunk: int = CHUNK) -> Iterator[np.ndarray]:
    """Chunks, in rank order, of the rows of several inputs each already in rank order (tilejob.NpyRows
    or arrays: only `chunk` rows of each are read at a time)."""
    pos = [0] * len(inputs)
    live = [k for k, a in enumerate(inputs) if len(a)]
    while live:
        windows = {k: inputs[k][pos[k] : pos[k] + chunk] for k in live}
        # rows up to the smallest last key of a window with more rows behind it are final
        open_ends = [rank_key(windows[k][-1]) for k in live if pos[k] + chunk < len(inputs[k])]
        bound = min(open_ends) if open_ends else None
        parts = []
        for k in live:
            w = windows[k]
            take = len(w) if bound is None else bisect.bisect_right(range(len(w)), bound, key=lambda t: rank_key(w[t]))
            if take:
                parts.append(w[:take])
                pos[k] += take
        out = np.concatenate(parts)
        yield out[rank_order(out)]
        live = [k for k in live if pos[k] < len(inputs[k])]


def ranked(job, tiles: Iterable[int], scratch: Path, chunk: int = CHUNK, fan_in: int = FAN_IN) -> Iterator[np.ndarray]:
    """The in-box pairs of the given finished tiles, in rank order, as chunks."""
    inputs = [_Prefix(job.rows(k), job.done[k]["kept"]) for k in sorted(tiles)]
    level = 0
    try:
        while len(inputs) > fan_in:  # a pass over groups of fan_in inputs, each into one sorted file
            folder = Path(scratch) / f"level{level}"
            folder.mkdir(parents=True, exist_ok=True)
            merged = []
            for g in range(0, len(inputs), fan_in):
                group = inputs[g : g + fan_in]
                path = folder / f"{g // fan_in:06d}.npy"
                write_npy(path, group[0].dtype, sum(map(len, group)), _merge_sorted(group, chunk))
                merged.append(NpyRows(path))
            inputs, level = merged, level + 1
        yield from _merge_sorted(inputs, chunk)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class _Prefix:
    """The first `n` rows of an input (a tile file's in-box rows; the sample for the scatter follows)."""

    def __init__(self, rows, n: int):
        self.rows, self.n, self.dtype = rows, n, rows.dtype

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: slice) -> np.ndarray:
        start, stop, _ = s.indices(self.n)
        return self.rows[start:stop]


def shared_drops(job, tiles: Iterable[int], shared: np.ndarray, dino_max: float, step: int = 1 << 20):
    """(the (id_a, id_b) of a rectangle's pairs that keep_across drops, how many of them are CLIP-alike, how
    many in the box): of pairs of two images both in `shared` (bytes ids), found in every stored row of the
    finished tiles (in the box or not: keep_across prefers the orientation in the box). Holds only those."""
    from vhmine.mine.join import keep_across

    id_a, id_b, box = [], [], []
    for k in sorted(tiles):
        rows = job.rows(k)
        for s in range(0, len(rows), step):
            part = rows[s : s + step]
            part = part[np.isin(part["id_a"], shared) & np.isin(part["id_b"], shared)]
            id_a.append(part["id_a"].astype(object))
            id_b.append(part["id_b"].astype(object))
            box.append(part["dino"] <= dino_max)
    if not id_a:
        return set(), 0, 0
    id_a, id_b, box = np.concatenate(id_a), np.concatenate(id_b), np.concatenate(box)
    dropped = ~keep_across(id_a, id_b, prefer=box)
    return set(zip(id_a[dropped].tolist(), id_b[dropped].tolist())), int(dropped.sum()), int((dropped & box).sum())


def without(chunks: Iterable[np.ndarray], drop: set) -> Iterator[np.ndarray]:
    """The chunks less their rows whose (id_a, id_b) is in `drop` (shared_drops), in the same order."""
    for rows in chunks:
        if drop:
            pairs = zip(rows["id_a"].tolist(), rows["id_b"].tolist())
            rows = rows[np.fromiter((p not in drop for p in pairs), bool, len(rows))]
        if len(rows):
            yield rows


def capped(
    chunks: Iterable[np.ndarray], *, max_per_image: int | None, max_pairs: int | None, tally: dict | None = None
) -> Iterator[np.ndarray]:
    """The rows rank_pairs keeps, in order: at most max_per_image pairs per image (greedy, in rank order:
    a pair is kept while both its images have fewer), then the first max_pairs. tally (when given) gets
    per_image: the pairs --max-per-image refused, as rank_pairs counts them (mine.rank.record_cuts)."""
    left = max_pairs
    used: dict[bytes, int] = {}
    if tally is not None:
        tally["per_image"] = 0
    for rows in chunks:
        if max_per_image:
            keep = []
            for t, (a, b) in enumerate(zip(rows["id_a"].tolist(), rows["id_b"].tolist())):
                if used.get(a, 0) < max_per_image and used.get(b, 0) < max_per_image:
                    used[a] = used.get(a, 0) + 1
                    used[b] = used.get(b, 0) + 1
                    keep.append(t)
                    if left is not None and len(keep) >= left:
                        break
                elif tally is not None:
                    tally["per_image"] += 1
            rows = rows[np.asarray(keep, dtype=np.int64)]
        if left is not None:
            rows = rows[:left]
            left -= len(rows)
        if len(rows):
            yield rows
        if left == 0:
            return


def scatter_points(job, tiles: Iterable[int], limit: int, drop: set = frozenset()) -> tuple[np.ndarray, np.ndarray]:
    """(clip, dino) of at most about `limit` CLIP-alike pairs for the scatter plot: every stored pair of
    each tile when they fit (then the plot is the local engine's), else an even sample of each tile's; less
    the pairs in `drop` (shared_drops: a rectangle's pairs of images in both indexes, which the local engine
    drops before its scatter too)."""
    tiles = sorted(tiles)
    per_tile = max(1, limit // max(1, len(tiles)))
    clips, dinos = [], []
    for k in tiles:
        rows = job.rows(k)
        kept = job.done[k]["kept"]
        for lo, hi in ((0, kept), (kept, len(rows))):
            if hi - lo > per_tile:
                part = rows.at(lo + np.unique(np.linspace(0, hi - lo - 1, per_tile).astype(np.int64)))
            else:
                part = rows[lo:hi]
            part = next(iter(without([part], drop)), part[:0])
            clips.append(part["clip"])
            dinos.append(part["dino"])
    if not clips:
        return np.empty(0), np.empty(0)
    return np.concatenate(clips), np.concatenate(dinos)
