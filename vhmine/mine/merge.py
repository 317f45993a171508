"""The finished tiles of a ranked job (mine.tilejob) merged into the run's pairs, in rank order, with
--max-per-image and --max-pairs applied, without any one process holding every pair.

Reads the tile files (each holds its in-box pairs in rank order, then a sample of the other CLIP-alike
pairs); writes only intermediate merge files under the job folder's `merge/` when there are more tiles
than one pass merges (FAN_IN), removed once read. Memory: FAN_IN x CHUNK rows, plus one entry per image
that has a kept pair when --max-per-image is given (the greedy cap needs that count).

The merge is exact: keys are (-gap, id_a, id_b, lo, hi), a total order equal to job.rank_pairs' (gap
descending, ties by image ids, then row order), and the greedy per-image cap visits pairs in that order
as rank_pairs does. Tiles can only pre-cut to their own top `max_pairs` when no per-image cap is given:
with one, a tile's later pairs may be needed once other tiles use up its images.
"""

from __future__ import annotations

import bisect
import shutil
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from vhmine.mine.tilejob import rank_key, rank_order

CHUNK = 8192  # rows read from each sorted input at a time
FAN_IN = 64  # inputs merged in one pass


def _merge_sorted(inputs: list[np.ndarray], chunk: int = CHUNK) -> Iterator[np.ndarray]:
    """Chunks, in rank order, of the rows of several arrays each already in rank order (memory maps:
    only `chunk` rows of each are read at a time)."""
    pos = [0] * len(inputs)
    live = [k for k, a in enumerate(inputs) if len(a)]
    while live:
        windows = {k: inputs[k][pos[k]:pos[k] + chunk] for k in live}
        # rows up to the smallest last key of a window with more rows behind it are final
        open_ends = [rank_key(windows[k][-1]) for k in live if pos[k] + chunk < len(inputs[k])]
        bound = min(open_ends) if open_ends else None
        parts = []
        for k in live:
            w = windows[k]
            take = len(w) if bound is None else bisect.bisect_right(range(len(w)), bound, key=lambda t: rank_key(w[t]))
            if take:
                parts.append(np.array(w[:take]))
                pos[k] += take
        out = np.concatenate(parts)
        yield out[rank_order(out)]
        live = [k for k in live if pos[k] < len(inputs[k])]


def ranked(job, tiles: Iterable[int], scratch: Path, chunk: int = CHUNK, fan_in: int = FAN_IN) -> Iterator[np.ndarray]:
    """The in-box pairs of the given finished tiles, in rank order, as chunks."""
    inputs = [job.rows(k)[: job.done[k]["kept"]] for k in sorted(tiles)]
    level = 0
    try:
        while len(inputs) > fan_in:  # a pass over groups of fan_in inputs, each into one sorted file
            folder = Path(scratch) / f"level{level}"
            folder.mkdir(parents=True, exist_ok=True)
            merged = []
            for g in range(0, len(inputs), fan_in):
                group = inputs[g:g + fan_in]
                path = folder / f"{g // fan_in:06d}.npy"
                out = np.lib.format.open_memmap(path, "w+", dtype=group[0].dtype, shape=(sum(map(len, group)),))
                at = 0
                for part in _merge_sorted(group, chunk):
                    out[at:at + len(part)] = part
                    at += len(part)
                out.flush()
                del out
                merged.append(np.load(path, mmap_mode="r"))
            inputs, level = merged, level + 1
        yield from _merge_sorted(inputs, chunk)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def capped(chunks: Iterable[np.ndarray], *, max_per_image: int | None, max_pairs: int | None) -> Iterator[np.ndarray]:
    """The rows rank_pairs keeps, in order: at most max_per_image pairs per image (greedy, in rank order:
    a pair is kept while both its images have fewer), then the first max_pairs."""
    left = max_pairs
    used: dict[bytes, int] = {}
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
            rows = rows[np.asarray(keep, dtype=np.int64)]
        if left is not None:
            rows = rows[:left]
            left -= len(rows)
        if len(rows):
            yield rows
        if left == 0:
            return


def scatter_points(job, tiles: Iterable[int], limit: int) -> tuple[np.ndarray, np.ndarray]:
    """(clip, dino) of at most about `limit` CLIP-alike pairs for the scatter plot: every stored pair of
    each tile when they fit (then the plot is the local engine's), else an even sample of each tile's."""
    tiles = sorted(tiles)
    per_tile = max(1, limit // max(1, len(tiles)))
    clips, dinos = [], []
    for k in tiles:
        rows = job.rows(k)
        e = job.done[k]
        for part in (rows[: e["kept"]], rows[e["kept"]:]):
            if len(part) > per_tile:
                part = part[np.unique(np.linspace(0, len(part) - 1, per_tile).astype(np.int64))]
            clips.append(np.asarray(part["clip"]))
            dinos.append(np.asarray(part["dino"]))
    if not clips:
        return np.empty(0), np.empty(0)
    return np.concatenate(clips), np.concatenate(dinos)
