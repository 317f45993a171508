"""`vhmine mine --engine ray`: mine.join.find_pairs' exact pair set, tile by tile on a Ray cluster, with
memory that does not grow with the collection, and a job that resumes where it stopped.

Reads nothing itself but the index's headers and a sample of 4,096 rows; the tasks (mine.ray.tiletask) read
their rows from the index by row range, a band's new rows by row number (vhmine.index.rows: positioned reads on a
shared filesystem, or byte ranges of an fsspec URL given as --index-url). Writes the job folder
(mine.ray.tilejob) through TileJob.record and TileJob.record_chunk.

In memory (tests, benchmarks): mine.ray.arrays.find_pairs_ray (every pair, or with new_rows those touching new
rows) and find_pairs_across_ray (the pairs across two sets of rows), through run_job.

The job, on the driver (`run_job`), for a shape of tiles (mine.ray.tileshapes: the upper triangle of one
index, the band of its pairs that touch new rows, or the rectangle of two indexes' pairs):
1. probe: one task pinned to each node reads the index; a node that cannot is named within seconds.
2. scan (mine.ray.scan): one streaming pass over every row (a task per chunk; both indexes of a rectangle)
   gives max |x| and max |R x|, and when asked each row's digest; with the sample they fix the
   quantisation (blocks.Quantiser), recorded in job.json, so every tile quantises the same way. A
   resumed job reads it back.
3. tiles: the shape's tiles not done yet, at most a few per worker in flight (the driver's
   memory is bookkeeping per tile, never per vector); each result is recorded as it arrives, with a
   tqdm bar of tiles done across all nodes.
The driver never holds the vectors; the merge (mine.ray.merge) and the writer (mine.write) stream.

Memory per task: `tile_bytes(side, clip_dim, dino_dim)`: the product and its masks (4.25 bytes a cell),
the int8 blocks and the worker's cache of them, the float32 rows a block is quantised from, and the rows
the re-check fetches; plus 24 bytes per candidate. The tile side is the largest multiple of 64 whose
tile_bytes fit --tile-memory, and each task asks Ray for that much memory (with --device cuda, the
product's share is GPU memory, and the task asks Ray for the rest).

Faults: a task whose worker dies (killed, out of memory, node lost) is retried up to max_retries times,
so a lost node costs the tiles it was running; a tile is pure, so a retry gives the same pairs. A driver
that stops (killed, cluster lost) loses nothing recorded: the same command resumes.
"""

from __future__ import annotations

import logging
import math
import os
import time

from vhmine.errors import InputError, VhmineError
from vhmine.mine.join import ALIGN, block_bytes
from vhmine.mine.ray.scan import (  # noqa: F401
    MAX_RETRIES,
    PROBE_TIMEOUT,
    _cancel,
    probe_nodes,
    prune_centres,
    scan,
    slots,
)

log = logging.getLogger(__name__)

DEFAULT_TILE_MEMORY = 1 << 30  # 1 GiB: a 14,272-row tile at 768 + 1024 dims
SCATTER_POINTS = 200_000


def tile_bytes(side: int, clip_dim: int, dino_dim: int) -> int:
    """A tile task's working memory besides its candidates (see the module docstring)."""
    from vhmine.mine.ray.tiletask import _CACHE_BLOCKS

    width = -(-clip_dim // 8) * 8
    return (
        block_bytes(side, width) + _CACHE_BLOCKS * side * width + 8 * side * clip_dim + 8 * side * (clip_dim + dino_dim)
    )


def tile_rows(tile_memory: int, clip_dim: int, dino_dim: int) -> int:
    """The largest multiple of 64 rows whose tile_bytes fit tile_memory."""
    need = tile_bytes(ALIGN, clip_dim, dino_dim)
    if need > tile_memory:
        have, least = mib_below(tile_memory, need)
        raise InputError(
            f"--tile-memory {have} MiB is too small: a tile of 64 rows at {clip_dim} + {dino_dim} "
            f"dims needs {least} MiB; give at least that"
        )
    side = math.isqrt(int(tile_memory / 4.25)) // ALIGN * ALIGN
    while tile_bytes(side, clip_dim, dino_dim) > tile_memory:
        side -= ALIGN
    return side


def mib_below(have: int, need: int) -> tuple[str, str]:
    """have < need bytes as MiB texts that show it: need to 3 significant digits (2 decimals at least),
    rounded up so that giving it is enough, and have to as many decimals; more while they read the same."""
    k = max(2, 2 - math.floor(math.log10(need / 2**20)))
    while True:
        h, n = round(have / 2**20, k), math.ceil(need / 2**20 * 10**k) / 10**k
        if h < n or k >= 12:
            return f"{h:.{k}f}", f"{n:.{k}f}"
        k += 1


def _reachable(address: str, timeout: float = 5.0) -> str | None:
    """Why a host:port (or ray://host:port) address cannot be reached now, or None. Ray itself retries
    an unreachable head for minutes before it gives up; this says so in seconds."""
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return None  # "auto", "local" and the like: Ray's own look-up
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as err:
        return err.strerror or str(err) or type(err).__name__
    return None


def import_ray():
    try:
        import ray
    except ImportError:
        raise InputError("--engine ray needs Ray: pip install 'vhmine[ray]' (or --engine local)") from None
    return ray


def connect(ray, address: str | None) -> bool:
    """Join the cluster at address (or the one RAY_ADDRESS names, or start a local one); True when this
    call started Ray and so must shut it down."""
    if ray.is_initialized():
        return False
    target = address or os.environ.get("RAY_ADDRESS")
    why = _reachable(target) if target else None
    if why:
        raise InputError(
            f"could not reach the Ray cluster at {target}: {why}. Check the address (`ray status` on the "
            "head node prints it), or leave out --ray-address to start a local cluster"
        )
    try:
        ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as err:
        where = address or os.environ.get("RAY_ADDRESS") or "a new local cluster"
        raise InputError(
            f"could not reach the Ray cluster at {where}: {err}. Check the address (`ray status` on the "
            "head node prints it), or leave out --ray-address to start a local cluster"
        ) from None
    return True


def _tile_failed(ray, err, max_retries: int, resume: str) -> VhmineError:
    cause = getattr(err, "cause", None)
    if isinstance(err, ray.exceptions.RayTaskError) and cause is not None:  # raised in the task: not retried
        return VhmineError(f"a mining tile failed: {type(cause).__name__}: {cause}{resume}")
    return VhmineError(
        f"a mining tile failed after {max_retries} retries: {type(err).__name__}: {str(err).strip()[:300]}. "
        f"If workers ran out of memory, lower --tile-memory; `ray status` shows the cluster's nodes{resume}"
    )


def run_job(
    ray,
    rows,
    job,
    *,
    side: int,
    clip_min: float,
    dino_max: float,
    ranked: bool,
    top: int | None = None,
    device: str = "cpu",
    max_candidates: int = 50_000_000,
    max_retries: int = MAX_RETRIES,
    rotate: bool | None = None,
    only=None,
    progress: bool = False,
    crash_marker: str | None = None,
    local=None,
    resumable: bool = True,
    kernel: str | None = None,
    shape=None,
    rows_b=None,
    local_b=None,
    keep_alike: bool = False,
    digests: bool = False,
    prune: bool | None = None,
) -> dict:
    """Mine every tile of `shape` not yet done in `job` (a tilejob.TileJob; `only`: just these tile numbers)
    and record each; returns what happened (tiles, quantiser, counts, workers' peak memory, rate, each
    worker's products kernel). shape: a tileshapes shape of `side` [default: Triangle(rows.n, side)]; a
    Rectangle's second index is rows_b (its rows as the driver reads them: local_b). kernel: --kernel, passed
    to every tile (else each node chooses its own). local: the driver's own view of the same index, when
    the workers read it elsewhere (--index-url). keep_alike: ranked tiles keep every CLIP-alike pair (see
    tiletask.mine_tile). digests: the scan records every row's digest in the job (TileJob.digests). prune: order
    each tile's blocks and skip the pieces that provably hold no candidate (mine.join.prune) [default: when a
    sample of the rows, measured on the driver, says it pays; True: always; False: never]."""
    from vhmine.mine.ray.tilejob import Triangle, ranked_dtype

    t0 = time.time()
    shape = shape if shape is not None else Triangle(rows.n, side)
    if shape.side != side or (shape.kind == "rectangle") != (rows_b is not None):
        raise ValueError(f"a {shape.kind} of side {shape.side} with side {side} and rows_b {rows_b is not None}")
    if "shape" in job.identity and job.identity["shape"] != shape.record():
        raise ValueError(f"the job's identity names shape {job.identity['shape']}, not {shape.record()}")
    wanted = range(len(shape)) if only is None else sorted({int(k) for k in only if 0 <= int(k) < len(shape)})
    before = {k for k in wanted if k in job.done}
    nodes = probe_nodes(ray, rows)
    if rows_b is not None:
        probe_nodes(ray, rows_b)
    qz = scan(
        ray, rows, job, side, rotate, progress, local, device, kernel, rows_b=rows_b, local_b=local_b, digests=digests
    )
    centres, pruning = prune_centres(rows, rows_b, local, local_b, qz, side, clip_min, prune)
    task = _tile_task(ray, rows, side, centres, device, max_retries)
    width = max(rows.id_width, rows_b.id_width if rows_b is not None else 0)
    kw = dict(
        device=device,
        max_candidates=max_candidates,
        ranked=ranked,
        top=top,
        rows_b=rows_b,
        sample=max(16, SCATTER_POINTS // max(1, len(shape))),
        dtype=ranked_dtype(width) if ranked else None,
        crash_marker=crash_marker,
        kernel=kernel,
        keep_alike=keep_alike,
        prune=centres,
    )
    todo = [k for k in wanted if k not in job.done]
    tiles = (shape, wanted, before, todo)
    _schedule(ray, task, job, tiles, (rows, qz, side, clip_min, dino_max), kw, max_retries, resumable, progress)
    return {**_summary(job, shape, wanted, before, qz, nodes, t0), "prune": _pruned(job, wanted, before, pruning)}


def _tile_task(ray, rows, side: int, centres, device: str, max_retries: int):
    """mine_tile as a Ray task asking for a tile's memory (tile_bytes; on cuda the product is the GPU's)."""
    from vhmine.mine.ray import tiletask

    host = tile_bytes(side, rows.clip.dim, rows.dino.dim)
    if centres is not None:  # the ordered copies of the cached blocks
        host += tiletask._CACHE_BLOCKS * side * (-(-rows.clip.dim // 8) * 8)
    if device == "cuda":  # the product and its masks live in the GPU's memory
        host -= math.ceil(4.25 * side * side)
    return ray.remote(tiletask.mine_tile).options(
        max_retries=max_retries, num_cpus=1, num_gpus=1 if device == "cuda" else 0, memory=host
    )


def _schedule(ray, task, job, tiles, args, kw: dict, max_retries: int, resumable: bool, progress: bool) -> None:
    """The tiles not done yet as tasks, at most a few per worker in flight, each recorded as it arrives."""
    from tqdm import tqdm

    shape, wanted, before, todo = tiles
    rows, qz, side, clip_min, dino_max = args
    max_candidates = kw["max_candidates"]
    limit = 2 * slots(ray, kw["device"]) + 2
    inflight: dict = {}

    def resume() -> str:
        if not resumable:
            return ""
        return f". Run the same command again to resume: {len(job.done)} of {len(shape)} tiles are done"

    with tqdm(
        total=len(wanted), initial=len(before), desc="mining tiles (ray)", unit="tile", disable=not progress
    ) as bar:
        at = 0
        while at < len(todo) or inflight:
            while at < len(todo) and len(inflight) < limit:
                k = todo[at]
                inflight[task.remote(rows, qz, shape.tile(k), side, clip_min, dino_max, **kw)] = k
                at += 1
            done, _ = ray.wait(list(inflight), num_returns=1)
            k = inflight.pop(done[0])
            try:
                out, info = ray.get(done[0])
            except ray.exceptions.RayError as err:
                _cancel(ray, list(inflight))
                raise _tile_failed(ray, err, max_retries, resume()) from None
            if out is None:
                _cancel(ray, list(inflight))
                raise InputError(
                    f"tile {k} ({shape.tile(k).where()}) alone has {info['too_many']:,} pairs with CLIP cosine near or "
                    f"above {clip_min:g}, more than the limit of {max_candidates:,} candidates; raise --clip above "
                    f"{clip_min:g} so that fewer pairs qualify"
                )
            job.record(k, out, info)
            bar.update(1)
            bar.set_postfix_str(
                f"{info['examined'] / max(info['seconds'], 1e-9):.3g} pairs/s on {info['node']}", refresh=False
            )


def _pruned(job, wanted, before: set, pruning: dict) -> dict:
    """The pruning's record: the choice, and the share of the products it skipped in the tiles mined now."""
    asked = skipped = 0
    for k in set(wanted) - before:
        a, s = job.done[k].get("pruned") or (0, 0)
        asked, skipped = asked + a, skipped + s
    return {**pruning, "skipped": round(skipped / asked, 6) if asked else None}


def _summary(job, shape, wanted, before: set, qz, nodes: list, t0: float) -> dict:
    """run_job's account of the tiles wanted: counts, workers' peak memory, kernels, the steady rate."""
    entries = [job.done[k] for k in wanted]
    workers: dict[str, int] = {}
    chosen: dict[str, dict] = {}  # the products kernels the nodes chose: tiles, a node's measured rates
    for e in entries:
        w = f"{e.get('node')}:{e.get('pid')}"
        workers[w] = max(workers.get(w, 0), int(e.get("peak_rss", 0)))
        if isinstance(e.get("kernel"), dict):
            k = chosen.setdefault(e["kernel"]["name"], {"tiles": 0, "gmac_per_s": e["kernel"]["gmac_per_s"]})
            k["tiles"] += 1
    mined = [e for e in entries if e["tile"] not in before]

    def full(e) -> bool:  # a triangle's diagonal tile's product holds half its pairs
        return e.get("kind", "triangle") != "triangle" or e["r"] != e["c"]

    # the rate: full tiles, after each worker's first (its warm-up: the product buffer's first touch,
    # kernel set-up), in the order they finished
    now = set(wanted) - before
    seen, steady = set(), []
    for e in (job.done[k] for k in job.done if k in now):
        if (e["node"], e["pid"]) in seen and full(e):
            steady.append(e)
        seen.add((e["node"], e["pid"]))
    rated = steady or [e for e in mined if full(e)] or mined
    busy = sum(e["seconds"] for e in rated)
    return {
        "tiles": len(shape),
        "tiles_wanted": len(wanted),
        "tiles_done_before": len(before),
        "tile": shape.side,
        "blocks": shape.blocks,
        "shape": shape.record(),
        "quantiser": qz.as_dict(),
        "nodes": nodes,
        "candidates": sum(e["candidates"] for e in entries),
        "clip_alike": sum(e["clip_alike"] for e in entries),
        "in_box": sum(e["in_box"] for e in entries),
        "margin": max((e["margin"] for e in entries), default=0.0),
        "workers_peak_rss": workers,
        "seconds": time.time() - t0,
        "kernels": chosen,
        "pairs_per_second_per_worker": (sum(e["examined"] for e in rated) / busy) if busy else None,
        "rate_tiles": [e["tile"] for e in rated],
        "tiles_timing": [
            {k: e[k] for k in ("tile", "r", "c", "examined", "seconds", "candidates", "node", "pid")}
            for e in mined[:64]
        ],
    }
