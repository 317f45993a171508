"""What one Ray task of `vhmine mine --engine ray` does, in the worker: read its rows from the index by
row range or by row number (vhmine.index.rows.IndexRows: positioned reads on a shared filesystem, or byte ranges
of an fsspec URL), compute (mine.blocks), and return its result to the driver. Writes no files; the driver records
results (mine.ray.tilejob). Nothing here holds more than two row blocks, so a task's memory does not grow with N.

- scan_chunk: the streaming pass over one chunk of rows (their largest turned component, the levels
  this node's products kernel keeps exact: mine.join.levels_of, and when asked their row digests: index.row_digests;
  rows whose norms the fast pass cannot bound are refused, rowcheck);
- mine_tile: one tile's pairs (of any tileshapes shape: a triangle's, a band's of new rows, a rectangle's
  across two indexes), ranked (oriented by image id, sorted in rank order, cut to the tile's own top list
  when only --max-pairs caps the run; with keep_alike, every CLIP-alike pair after them) or plain (rows and
  sims, for in-memory jobs);
- probe: that this node can import vhmine and read the index;
- sample_tile: one tile timed, quantised from its own two blocks, for `--plan`'s estimate.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict

import numpy as np

from vhmine.mine.join import (
    BlockStats,
    Quantiser,
    choose_turn,
    exact_pairs,
    qmax_for,
    quantise_block,
    sample_rows,
    scan_block,
    threshold,
    tile_candidates,
    tile_kernel,
)

CRASH_MARKER_ENV = "VHMINE_MINE_CRASH_MARKER"  # fault tests: the first tile task to start dies (os._exit)
_CACHE_BLOCKS = 3  # quantised blocks kept per worker: tiles of one row share their row block
_BLOCKS: OrderedDict = OrderedDict()
_ORDERED: OrderedDict = OrderedDict()  # (pruned jobs) the same blocks, ordered: prune.sort_block


def peak_rss() -> int:
    """This process's peak resident set (VmHWM), bytes; 0 where /proc is absent."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _where() -> dict:
    try:
        import ray

        node = ray.util.get_node_ip_address()
    except Exception:  # outside Ray (a direct call)
        node = "local"
    return {"node": node, "pid": os.getpid()}


def scan_chunk(
    rows,
    start: int,
    stop: int,
    dims: tuple[int, ...] = (),
    kernel: str | None = None,
    device: str = "cpu",
    digests: bool = False,
):
    """The chunk's largest turned component, and the quantisation levels that this node's products kernel
    keeps exact (`kernel` when named, else the one measured fastest here; on a GPU every kernel keeps
    qmax_for's); with digests, also its rows' index.row_digests (CLIP and DINOv2 rows: the index's kept
    ones (vhmine.index.stored_range, read by range) for each chunk of rows whose check still holds, hashed for
    the others; start a multiple of the kept chunks' rows) and {"digested": rows hashed, "checks": the chunks'
    checks}. InputError for a row the fast pass cannot bound (rowcheck)."""
    from vhmine.mine.join import check_norms, levels_of, squared_norms

    x = rows.clip.read(start, stop)
    check_norms("clip", x, squared_norms(x), first_row=start)
    if kernel not in (None, "auto"):
        levels = levels_of(kernel, x.shape[1])
    elif device == "cpu":
        levels = tile_kernel("cpu", -(-x.shape[1] // 8) * 8, 0).kernel.levels(x.shape[1])
    else:
        levels = qmax_for(x.shape[1])
    if not digests:
        return scan_block(x, dims), levels
    from vhmine.index import CHUNK_ROWS, DIGEST, checked_digests, chunk_checks, kept_location, row_digests, stored_range

    d = rows.dino.read(start, stop)
    checks = chunk_checks(x, d, CHUNK_ROWS)
    had = stored_range(kept_location(rows), start, stop, DIGEST, (x.shape[1], d.shape[1])) if rows.images else None
    out, digested = checked_digests(x, d, checks, had, row_digests)
    return scan_block(x, dims), levels, out, {"digested": digested, "checks": [c.hex() for c in map(bytes, checks)]}


def _cached(key, read, cache: OrderedDict = _BLOCKS):
    if key in cache:
        cache.move_to_end(key)
        return cache[key]
    while len(cache) >= _CACHE_BLOCKS:
        cache.popitem(last=False)
    cache[key] = read()
    return cache[key]


def _block(rows, qz: Quantiser, start: int, side: int) -> tuple[np.ndarray, BlockStats, tuple]:
    """Rows [start, start + side) quantised (a worker keeps the last few: tiles of one row share them), and
    their cache key."""
    key = (rows.clip.location, rows.version, qz, start, side)
    return (*_cached(key, lambda: quantise_block(rows.clip.read(start, start + side), qz)), key)


def take_within(vf, numbers: np.ndarray, span: int) -> np.ndarray:
    """VectorFile.take of sorted row numbers, a group of rows within `span` rows of each other at a time:
    take reads runs of near rows whole (for a URL, rows up to 256 apart), and scattered new rows must
    not make one read of many times the rows asked for."""
    out, s = np.empty((len(numbers), vf.dim), np.float32), 0
    while s < len(numbers):
        e = int(np.searchsorted(numbers, numbers[s] + span))
        out[s:e] = vf.take(numbers[s:e])
        s = e
    return out


def _block_of(rows, qz: Quantiser, numbers: np.ndarray, side: int) -> tuple[np.ndarray, BlockStats, tuple]:
    """The given rows (a band's chunk of new rows) quantised, cached by what they are: the row numbers'
    digest; and the cache key."""
    import hashlib

    key = (rows.clip.location, rows.version, qz, "rows", hashlib.sha256(numbers.astype("<i8").tobytes()).digest())
    return (*_cached(key, lambda: quantise_block(take_within(rows.clip, numbers, side), qz)), key)


def _ids_of(rows, numbers: np.ndarray) -> np.ndarray:
    """image ids of sorted unique row numbers, read by range a run of near rows at a time."""
    cuts = np.flatnonzero(np.diff(numbers) > 4096) + 1
    parts = [rows.ids(int(run[0]), int(run[-1]) + 1)[run - run[0]] for run in np.split(numbers, cuts) if len(run)]
    return np.concatenate(parts) if parts else np.zeros(0, f"S{rows.id_width}")


def _crash_once(marker: str | None) -> None:
    marker = marker or os.environ.get(CRASH_MARKER_ENV)
    if marker:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os._exit(1)


def examined(r: int, c: int, side: int, n: int) -> int:
    """Pairs a tile looks at: rows of its row block x rows of its column block (each pair once)."""
    a, b = max(0, min(side, n - r)), max(0, min(side, n - c))
    return a * (a - 1) // 2 if r == c else a * b


def _ordered(key, q: np.ndarray, n: int, prune, device, kernel, qz: Quantiser):
    """Block q (n real rows) ordered by the pruning's centres (prune.sort_block), cached beside the block."""
    import hashlib

    from vhmine.mine.join import sort_block

    k = (key, hashlib.sha256(prune.tobytes()).digest())
    choice = tile_kernel(device, q.shape[1], qz.qmax, kernel)
    return _cached(k, lambda: sort_block(q, n, prune, choice.kernel, device), _ORDERED)


def _candidates(rows, rows_b, qz: Quantiser, tile, side: int, clip_min: float, device, kernel, prune=None):
    """(i, j, info) of one tile's candidates: rows i < j (a Triangle's), i < j touching a new row once (a
    Band's: (min, max) of a chunk's row and a block's), or i of A and j of B (a Rectangle's). prune: the
    centres the blocks are ordered by (prune.tile_centres), or None: no pruning."""
    from vhmine.mine.join import cross_candidates

    n = rows.n
    if tile.kind == "band":
        qa, sa, ka = _block_of(rows, qz, tile.x_rows, side)
        na = len(tile.x_rows)
    else:
        qa, sa, ka = _block(rows, qz, tile.r, side)
        na = min(side, n - tile.r)
    other = rows_b if tile.kind == "rectangle" else rows
    same = tile.kind == "triangle" and tile.r == tile.c
    qb, sb, kb = (qa, sa, ka) if same else _block(other, qz, tile.c, side)
    nb = min(side, other.n - tile.c)
    thresh, margin = threshold(qz, sa | sb, clip_min)
    ordered = None
    if prune is not None:
        oa = _ordered(ka, qa, na, prune, device, kernel, qz)
        ordered = (oa, oa if same else _ordered(kb, qb, nb, prune, device, kernel, qz))
    account: dict = {}
    kw = dict(device=device, block=side, levels=qz.qmax, kernel=kernel, ordered=ordered, account=account)
    if tile.kind == "triangle":
        i, j = tile_candidates(qa, qb, tile.r, tile.c, thresh, n, **kw)
        seen = examined(tile.r, tile.c, side, n)
    else:
        p, q = cross_candidates(qa, qb, na, nb, thresh, **kw)
        i, j, seen = (tile.x_rows[p] if tile.kind == "band" else tile.r + p), tile.c + q, na * nb
        if tile.kind == "band":  # each pair once over all tiles
            i, j = tile.band_pairs(i, j)
    return (
        i,
        j,
        {
            "kind": tile.kind,
            "r": tile.r,
            "c": tile.c,
            "examined": seen,
            "margin": margin,
            "kernel": tile_kernel(device, qa.shape[1], qz.qmax, kernel).record(),
            "pruned": [account.get("asked", 0), account.get("skipped", 0)],
        },
    )


def mine_tile(
    rows,
    qz: Quantiser,
    tile,
    side: int,
    clip_min: float,
    dino_max: float,
    *,
    rows_b=None,
    device: str = "cpu",
    max_candidates: int,
    ranked: bool,
    top: int | None = None,
    sample: int = 0,
    dtype=None,
    crash_marker: str | None = None,
    kernel: str | None = None,
    keep_alike: bool = False,
    prune=None,
):
    """(result rows, info) of a tile (a tileshapes.Tile; rows_b: a Rectangle's second index); result None
    and info["too_many"] when it has more than max_candidates candidates (the driver stops the job).
    Ranked: every pair with CLIP >= clip_min is found, those with DINOv2 <= dino_max are kept in rank order
    (the first `top` when given: info["kept"] of them), followed by at most `sample` of the others for the
    scatter plot, or with keep_alike by every other one (info["sample"] of them). Oriented by image id
    (a < b), except a Rectangle's: a is the row of A, b of B. Plain: the pairs inside both thresholds, as
    rows i < j (a Rectangle's: i of A, j of B), sorted. prune: the int8 centres the tile's blocks are ordered
    by to skip products (prune.tile_centres), or None."""
    import torch  # noqa: F401  (before the clock: a worker's first import is no part of the tile's time)

    from vhmine.mine.ray.tilejob import PLAIN, box_first, orient_by_id

    _crash_once(crash_marker)
    t0 = time.perf_counter()
    i, j, info = _candidates(rows, rows_b, qz, tile, side, clip_min, device, kernel, prune)
    info.update(candidates=int(len(i)), **_where())
    if len(i) > max_candidates:
        return None, {**info, "too_many": int(len(i))}
    fetch = [rows.clip.take, rows.dino.take]
    if tile.kind == "rectangle":
        fetch += [rows_b.clip.take, rows_b.dino.take]
    elif tile.kind == "band":  # (a band's rows: scattered new rows and a block)
        fetch = [lambda u, vf=vf: take_within(vf, u, side) for vf in (rows.clip, rows.dino)]
    i, j, cs, ds = exact_pairs(fetch[0], fetch[1], i, j, clip_min, np.inf if ranked else dino_max, *fetch[2:])
    if not ranked:
        out = np.empty(len(i), PLAIN)
        out["i"], out["j"], out["clip"], out["dino"] = i, j, cs, ds
        out = out[np.lexsort((out["j"], out["i"]))]
        info.update(kept=len(out), sample=0, clip_alike=len(out), in_box=len(out))
    else:
        out = np.empty(len(i), dtype)
        out["clip"], out["dino"], out["gap"] = cs, ds, cs - ds
        out["lo"], out["hi"] = i, j
        if tile.kind == "rectangle":  # one image from each side: a of A, b of B, never swapped
            out["a"], out["b"] = i, j
            out["id_a"] = rows.ids(tile.r, tile.r + side)[i - tile.r]
            out["id_b"] = rows_b.ids(tile.c, tile.c + side)[j - tile.c]
        else:
            if tile.kind == "band":
                uniq = np.unique(np.concatenate([i, j]))
                ids = _ids_of(rows, uniq)
                id_i, id_j = ids[np.searchsorted(uniq, i)], ids[np.searchsorted(uniq, j)]
            else:
                ids_a = rows.ids(tile.r, tile.r + side)
                ids_b = ids_a if tile.r == tile.c else rows.ids(tile.c, tile.c + side)
                id_i, id_j = ids_a[i - tile.r], ids_b[j - tile.c]
            orient_by_id(out, i, j, id_i, id_j)
        box = ds <= dino_max
        out, kept, others = box_first(out, box, top, None if keep_alike else sample)
        info.update(kept=kept, sample=others, clip_alike=int(len(i)), in_box=int(box.sum()))
    info.update(seconds=time.perf_counter() - t0, peak_rss=peak_rss())
    return out, info


def probe(rows) -> dict:
    """Raises what this node's tasks would meet (vhmine or torch missing, the index unreadable)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # found, not imported: a probe answers in seconds
        raise ModuleNotFoundError("torch is not installed on this node: the tile tasks need it")
    rows.probe()
    return _where()


def sample_tile(
    rows, r: int, c: int, side: int, clip_min: float, device: str = "cpu", kernel: str | None = None
) -> dict:
    """One tile timed end to end (reads, quantisation, products, re-check), quantised with parameters
    from its own two blocks (a plan needs a rate, not the run's pairs), with the products kernel this
    node chooses (its calibration, once per node, is not timed: the tiles of a run do not pay it either)."""
    import torch  # noqa: F401  (as mine_tile: not timed)

    width = -(-rows.clip.dim // 8) * 8
    choice = tile_kernel(device, width, 0, kernel)
    levels = choice.kernel.levels(rows.clip.dim)
    t0 = time.perf_counter()
    xa = rows.clip.read(r, r + side)
    xb = xa if r == c else rows.clip.read(c, c + side)
    dims = choose_turn(xa[sample_rows(len(xa))])
    qz = Quantiser.from_scan(rows.clip.dim, max(scan_block(xa, dims), scan_block(xb, dims)), dims, levels)
    t_scan = time.perf_counter() - t0
    qa, sa = quantise_block(xa, qz)
    qb, sb = (qa, sa) if r == c else quantise_block(xb, qz)
    thresh, _ = threshold(qz, sa | sb, clip_min)
    i, j = tile_candidates(qa, qb, r, c, thresh, rows.n, device=device, block=side, levels=qz.qmax, kernel=kernel)
    exact_pairs(rows.clip.take, rows.dino.take, i, j, clip_min, np.inf)
    return {
        "seconds": time.perf_counter() - t0,
        "scan_seconds": t_scan,
        "scan_rows": len(xa) + (len(xb) if c != r else 0),
        "examined": examined(r, c, side, rows.n),
        "candidates": int(len(i)),
        "peak_rss": peak_rss(),
        "kernel": choice.record(),
        "kernel_line": choice.line(),
        **_where(),
    }
