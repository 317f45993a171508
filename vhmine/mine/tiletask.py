"""What one Ray task of `vhmine mine --engine ray` does, in the worker: read its rows from the index by
row range (embed.rows.IndexRows: positioned reads on a shared filesystem, or byte ranges of an fsspec URL),
compute (mine.blocks), and return its result to the driver. Writes no files; the driver records results
(mine.tilejob). Nothing here holds more than two row blocks, so a task's memory does not grow with N.

- scan_chunk: the streaming pass over one chunk of rows (their largest turned component, and the levels
  this node's products kernel keeps exact: mine.kernels; rows whose norms the fast pass cannot bound are
  refused, rowcheck);
- mine_tile: one tile's pairs, ranked (oriented by image id, sorted in rank order, cut to the tile's own
  top list when only --max-pairs caps the run) or plain (rows and sims, for in-memory jobs);
- probe: that this node can import vhmine and read the index;
- sample_tile: one tile timed, quantised from its own two blocks, for `--plan`'s estimate.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict

import numpy as np

from vhmine.mine.blocks import (
    BlockStats, Quantiser, choose_turn, exact_pairs, quantise_block, sample_rows, scan_block, threshold,
    tile_candidates, tile_kernel,
)
from vhmine.mine.quantise import qmax_for

CRASH_MARKER_ENV = "VHMINE_MINE_CRASH_MARKER"  # fault tests: the first tile task to start dies (os._exit)
_CACHE_BLOCKS = 3  # quantised blocks kept per worker: tiles of one row share their row block
_BLOCKS: OrderedDict = OrderedDict()


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


def scan_chunk(rows, start: int, stop: int, dims: tuple[int, ...] = (), kernel: str | None = None,
               device: str = "cpu") -> tuple[float, int]:
    """The chunk's largest turned component, and the quantisation levels that this node's products kernel
    keeps exact (`kernel` when named, else the one measured fastest here; on a GPU every kernel keeps
    qmax_for's); InputError for a row the fast pass cannot bound (rowcheck)."""
    from vhmine.mine.kernels import levels_of
    from vhmine.mine.rowcheck import check_norms, squared_norms

    x = rows.clip.read(start, stop)
    check_norms("clip", x, squared_norms(x), first_row=start)
    if kernel not in (None, "auto"):
        levels = levels_of(kernel, x.shape[1])
    elif device == "cpu":
        levels = tile_kernel("cpu", -(-x.shape[1] // 8) * 8, 0).kernel.levels(x.shape[1])
    else:
        levels = qmax_for(x.shape[1])
    return scan_block(x, dims), levels


def _block(rows, qz: Quantiser, start: int, side: int) -> tuple[np.ndarray, BlockStats]:
    key = (rows.clip.location, rows.version, qz, start, side)
    if key in _BLOCKS:
        _BLOCKS.move_to_end(key)
        return _BLOCKS[key]
    while len(_BLOCKS) >= _CACHE_BLOCKS:
        _BLOCKS.popitem(last=False)
    _BLOCKS[key] = quantise_block(rows.clip.read(start, start + side), qz)
    return _BLOCKS[key]


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


def mine_tile(rows, qz: Quantiser, r: int, c: int, side: int, clip_min: float, dino_max: float, *,
              device: str = "cpu", max_candidates: int, ranked: bool, top: int | None = None, sample: int = 0,
              dtype=None, crash_marker: str | None = None, kernel: str | None = None):
    """(result rows, info) of tile (r, c); result None and info["too_many"] when it has more than
    max_candidates candidates (the driver stops the job). Ranked: every pair with CLIP >= clip_min is
    found, those with DINOv2 <= dino_max are kept in rank order (the first `top` when given), followed by
    at most `sample` of the others for the scatter plot. Plain: the pairs inside both thresholds."""
    import torch  # noqa: F401  (before the clock: a worker's first import is no part of the tile's time)

    from vhmine.mine.tilejob import PLAIN, rank_order

    _crash_once(crash_marker)
    t0 = time.perf_counter()
    n = rows.n
    qa, sa = _block(rows, qz, r, side)
    qb, sb = (qa, sa) if r == c else _block(rows, qz, c, side)
    thresh, margin = threshold(qz, sa | sb, clip_min)
    i, j = tile_candidates(qa, qb, r, c, thresh, n, device=device, block=side, levels=qz.qmax, kernel=kernel)
    info = {"r": r, "c": c, "candidates": int(len(i)), "examined": examined(r, c, side, n), "margin": margin,
            "kernel": tile_kernel(device, qa.shape[1], qz.qmax, kernel).record(), **_where()}
    if len(i) > max_candidates:
        return None, {**info, "too_many": int(len(i))}
    i, j, cs, ds = exact_pairs(rows.clip.take, rows.dino.take, i, j, clip_min, np.inf if ranked else dino_max)
    if not ranked:
        out = np.empty(len(i), PLAIN)
        out["i"], out["j"], out["clip"], out["dino"] = i, j, cs, ds
        out = out[np.lexsort((out["j"], out["i"]))]
        info.update(kept=len(out), sample=0, clip_alike=len(out), in_box=len(out))
    else:
        ids_a = rows.ids(r, r + side)
        ids_b = ids_a if r == c else rows.ids(c, c + side)
        id_i, id_j = ids_a[i - r], ids_b[j - c]
        swap = id_i > id_j  # oriented by image id, as job.mine_index does
        out = np.empty(len(i), dtype)
        out["a"], out["b"] = np.where(swap, j, i), np.where(swap, i, j)
        out["id_a"], out["id_b"] = np.where(swap, id_j, id_i), np.where(swap, id_i, id_j)
        out["clip"], out["dino"], out["gap"] = cs, ds, cs - ds
        out["lo"], out["hi"] = i, j
        box = ds <= dino_max
        inside = out[box][rank_order(out[box])]
        if top is not None:
            inside = inside[:top]
        rest = out[~box]  # in (i, j) order: an even sample of them
        if len(rest) > sample:
            rest = rest[np.unique(np.linspace(0, len(rest) - 1, sample).astype(np.int64))] if sample else rest[:0]
        info.update(kept=len(inside), sample=len(rest), clip_alike=int(len(i)), in_box=int(box.sum()))
        out = np.concatenate([inside, rest])
    info.update(seconds=time.perf_counter() - t0, peak_rss=peak_rss())
    return out, info


def probe(rows) -> dict:
    """Raises what this node's tasks would meet (vhmine or torch missing, the index unreadable)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # found, not imported: a probe answers in seconds
        raise ModuleNotFoundError("torch is not installed on this node: the tile tasks need it")
    rows.probe()
    return _where()


def sample_tile(rows, r: int, c: int, side: int, clip_min: float, device: str = "cpu",
                kernel: str | None = None) -> dict:
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
    return {"seconds": time.perf_counter() - t0, "scan_seconds": t_scan, "scan_rows": len(xa) + (len(xb) if c != r else 0),
            "examined": examined(r, c, side, rows.n), "candidates": int(len(i)), "peak_rss": peak_rss(),
            "kernel": choice.record(), "kernel_line": choice.line(), **_where()}
