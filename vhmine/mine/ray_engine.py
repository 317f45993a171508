"""`vhmine mine --engine ray`: simsearch.find_pairs' exact pair set, tile by tile on a Ray cluster, with
memory that does not grow with the collection, and a job that resumes where it stopped.

Reads nothing itself but the index's headers and a sample of 4,096 rows; the tasks (mine.tiletask) read
their rows from the index by row range (embed.rows: positioned reads on a shared filesystem, or byte ranges
of an fsspec URL given as --index-url). Writes the job folder (mine.tilejob) through TileJob.record.

The job, on the driver (`run_job`):
1. probe: one task pinned to each node reads the index; a node that cannot is named within seconds.
2. scan: one streaming pass over every row (a task per chunk) gives max |x| and max |R x|; with the
   sample they fix the quantisation (blocks.Quantiser), recorded in job.json, so every tile quantises
   the same way. A resumed job reads it back.
3. tiles: the upper triangle's tiles not done yet, at most a few per worker in flight (the driver's
   memory is bookkeeping per tile, never per vector); each result is recorded as it arrives, with a
   tqdm bar of tiles done across all nodes.
The driver never holds the vectors; the merge (mine.merge) and the writer (mine.write) stream.

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
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from vhmine.errors import InputError, VhmineError
from vhmine.mine.products import block_bytes
from vhmine.mine.quantise import _ALIGN
from vhmine.mine.rowcheck import check_limits
from vhmine.mine.simsearch import _EMPTY, PairSet, _check, merge

log = logging.getLogger(__name__)

DEFAULT_TILE_MEMORY = 1 << 30  # 1 GiB: a 14,272-row tile at 768 + 1024 dims
MAX_RETRIES = 3
PROBE_TIMEOUT = 60.0  # seconds for every node to start a worker and read the index
SCATTER_POINTS = 200_000


def tile_bytes(side: int, clip_dim: int, dino_dim: int) -> int:
    """A tile task's working memory besides its candidates (see the module docstring)."""
    from vhmine.mine.tiletask import _CACHE_BLOCKS

    width = -(-clip_dim // 8) * 8
    return (block_bytes(side, width) + _CACHE_BLOCKS * side * width + 8 * side * clip_dim
            + 8 * side * (clip_dim + dino_dim))


def tile_rows(tile_memory: int, clip_dim: int, dino_dim: int) -> int:
    """The largest multiple of 64 rows whose tile_bytes fit tile_memory."""
    need = tile_bytes(_ALIGN, clip_dim, dino_dim)
    if need > tile_memory:
        have, least = mib_below(tile_memory, need)
        raise InputError(
            f"--tile-memory {have} MiB is too small: a tile of 64 rows at {clip_dim} + {dino_dim} "
            f"dims needs {least} MiB; give at least that"
        )
    side = math.isqrt(int(tile_memory / 4.25)) // _ALIGN * _ALIGN
    while tile_bytes(side, clip_dim, dino_dim) > tile_memory:
        side -= _ALIGN
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


def _cancel(ray, refs) -> None:
    # force: end the workers. A plain cancel interrupts a task wherever it is, even inside `import torch`,
    # and leaves that half-imported module in a worker that Ray then reuses for other tasks.
    for ref in refs:
        ray.cancel(ref, force=True)


def _tile_failed(ray, err, max_retries: int, resume: str) -> VhmineError:
    cause = getattr(err, "cause", None)
    if isinstance(err, ray.exceptions.RayTaskError) and cause is not None:  # raised in the task: not retried
        return VhmineError(f"a mining tile failed: {type(cause).__name__}: {cause}{resume}")
    return VhmineError(
        f"a mining tile failed after {max_retries} retries: {type(err).__name__}: {str(err).strip()[:300]}. "
        f"If workers ran out of memory, lower --tile-memory; `ray status` shows the cluster's nodes{resume}"
    )


def slots(ray, device: str) -> int:
    """How many tile tasks the cluster runs at once."""
    res = ray.cluster_resources()
    return max(1, int(res.get("GPU" if device == "cuda" else "CPU", 0)))


def probe_nodes(ray, rows, timeout: float = PROBE_TIMEOUT) -> list[str]:
    """Every alive node reads the index (tiletask.probe); raises InputError naming the first that cannot,
    or that does not answer within `timeout` seconds. Returns the nodes' addresses."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from vhmine.mine import tiletask

    nodes = [nd for nd in ray.nodes() if nd.get("Alive")]
    task = ray.remote(num_cpus=0, max_retries=0)(tiletask.probe)
    refs = {task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nd["NodeID"], soft=False)).remote(rows):
            nd.get("NodeManagerAddress", nd["NodeID"]) for nd in nodes}
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
    hint = ("; mount the index at the same path on every node, or pass --index-url with a URL every node can read "
            "(s3://..., gs://..., file:///shared/...)")
    for ref in ready:
        try:
            ray.get(ref)
        except ray.exceptions.RayError as err:
            cause = getattr(err, "cause", None) or err
            raise InputError(f"node {refs[ref]} cannot read the index: {type(cause).__name__}: "
                             f"{str(cause).strip()[:300]}{hint}") from None
    if late:
        _cancel(ray, late)
        raise InputError(f"node {refs[late[0]]} did not read the index within {timeout:g} s (is vhmine installed "
                         f"there, and does the node have a free worker?){hint}")
    return sorted(refs.values())


def scan(ray, rows, side: int, rotate: bool | None, progress: bool, local=None, device: str = "cpu",
         kernel: str | None = None):
    """The streaming pass: the Quantiser of every row, from one task per chunk of `side` rows (the
    turn's sample is read by the driver, from `local`: its own view of the index), with the fewest
    levels that the nodes' products kernels keep exact (each task's node chooses its own)."""
    from tqdm import tqdm

    from vhmine.mine import tiletask
    from vhmine.mine.blocks import Quantiser, choose_turn, sample_rows

    task = ray.remote(tiletask.scan_chunk).options(num_cpus=1, max_retries=MAX_RETRIES,
                                                   memory=16 * side * rows.clip.dim)
    starts = list(range(0, rows.n, side))
    dims = choose_turn((local or rows).clip.take(sample_rows(rows.n)), rotate)
    amax, levels = 0.0, None
    inflight, at = [], 0
    with tqdm(total=len(starts), desc="scanning rows (ray)", unit="chunk", disable=not progress) as bar:
        while at < len(starts) or inflight:
            while at < len(starts) and len(inflight) < 2 * slots(ray, "cpu") + 2:
                inflight.append(task.remote(rows, starts[at], starts[at] + side, dims, kernel, device))
                at += 1
            done, inflight = ray.wait(inflight, num_returns=1)
            try:
                a, lv = ray.get(done[0])
            except ray.exceptions.RayTaskError as err:  # a row the chunk refused (rowcheck): its own line
                _cancel(ray, inflight)
                if isinstance(getattr(err, "cause", None), VhmineError):
                    raise type(err.cause)(str(err.cause)) from None
                raise
            amax, levels = max(amax, a), lv if levels is None else min(levels, lv)
            bar.update(1)
    return Quantiser.from_scan(rows.clip.dim, amax, dims, levels)


def run_job(ray, rows, job, *, side: int, clip_min: float, dino_max: float, ranked: bool, top: int | None = None,
            device: str = "cpu", max_candidates: int = 50_000_000, max_retries: int = MAX_RETRIES,
            rotate: bool | None = None, only=None, progress: bool = False, crash_marker: str | None = None,
            local=None, resumable: bool = True, kernel: str | None = None) -> dict:
    """Mine every tile of `rows` not yet done in `job` (a tilejob.TileJob; `only`: just these tile numbers)
    and record each; returns what happened (tiles, quantiser, counts, workers' peak memory, rate, each
    worker's products kernel). kernel: --kernel, passed to every tile (else each node chooses its own).
    local: the driver's own view of the same index, when the workers read it elsewhere (--index-url)."""
    from tqdm import tqdm

    from vhmine.mine import tiletask
    from vhmine.mine.blocks import Quantiser
    from vhmine.mine.tilejob import Triangle, ranked_dtype

    t0 = time.time()
    tri = Triangle(rows.n, side)
    wanted = range(len(tri)) if only is None else sorted({int(k) for k in only if 0 <= int(k) < len(tri)})
    before = {k for k in wanted if k in job.done}
    nodes = probe_nodes(ray, rows)
    qz = Quantiser.from_dict(job.job["quantiser"]) if "quantiser" in job.job else None
    if qz is None:
        qz = scan(ray, rows, side, rotate, progress, local, device, kernel)
        job.save(quantiser=qz.as_dict())
    host = tile_bytes(side, rows.clip.dim, rows.dino.dim)
    if device == "cuda":  # the product and its masks live in the GPU's memory
        host -= math.ceil(4.25 * side * side)
    task = ray.remote(tiletask.mine_tile).options(
        max_retries=max_retries, num_cpus=1, num_gpus=1 if device == "cuda" else 0, memory=host)
    kw = dict(device=device, max_candidates=max_candidates, ranked=ranked, top=top,
              sample=max(16, SCATTER_POINTS // max(1, len(tri))), dtype=ranked_dtype(rows.id_width) if ranked else None,
              crash_marker=crash_marker, kernel=kernel)
    todo = [k for k in wanted if k not in job.done]
    limit = 2 * slots(ray, device) + 2
    inflight: dict = {}

    def resume() -> str:
        if not resumable:
            return ""
        return f". Run the same command again to resume: {len(job.done)} of {len(tri)} tiles are done"

    with tqdm(total=len(wanted), initial=len(before), desc="mining tiles (ray)", unit="tile",
              disable=not progress) as bar:
        at = 0
        while at < len(todo) or inflight:
            while at < len(todo) and len(inflight) < limit:
                k = todo[at]
                inflight[task.remote(rows, qz, *tri.tile_at(k), side, clip_min, dino_max, **kw)] = k
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
                r, c = tri.tile_at(k)
                raise InputError(
                    f"tile {k} (rows {r:,} and {c:,}) alone has {info['too_many']:,} pairs with CLIP cosine near or "
                    f"above {clip_min:g}, more than the limit of {max_candidates:,} candidates; raise --clip above "
                    f"{clip_min:g} so that fewer pairs qualify")
            job.record(k, out, info)
            bar.update(1)
            bar.set_postfix_str(f"{info['examined'] / max(info['seconds'], 1e-9):.3g} pairs/s on {info['node']}",
                                refresh=False)
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
    # the rate: full tiles (a diagonal tile's product holds half its pairs), after each worker's first
    # (its warm-up: the product buffer's first touch, kernel set-up), in the order they finished
    now = set(wanted) - before
    seen, steady = set(), []
    for e in (job.done[k] for k in job.done if k in now):
        if (e["node"], e["pid"]) in seen and e["r"] != e["c"]:
            steady.append(e)
        seen.add((e["node"], e["pid"]))
    full = steady or [e for e in mined if e["r"] != e["c"]] or mined
    busy = sum(e["seconds"] for e in full)
    return {
        "tiles": len(tri), "tiles_wanted": len(wanted), "tiles_done_before": len(before), "tile": side,
        "blocks": tri.blocks, "quantiser": qz.as_dict(), "nodes": nodes,
        "candidates": sum(e["candidates"] for e in entries), "clip_alike": sum(e["clip_alike"] for e in entries),
        "in_box": sum(e["in_box"] for e in entries), "margin": max((e["margin"] for e in entries), default=0.0),
        "workers_peak_rss": workers, "seconds": time.time() - t0, "kernels": chosen,
        "pairs_per_second_per_worker": (sum(e["examined"] for e in full) / busy) if busy else None,
        "rate_tiles": [e["tile"] for e in full],
        "tiles_timing": [{k: e[k] for k in ("tile", "r", "c", "examined", "seconds", "candidates", "node", "pid")}
                         for e in mined[:64]],
    }


def find_pairs_ray(
    clip: np.ndarray,
    dino: np.ndarray,
    clip_min: float,
    dino_max: float = math.inf,
    *,
    address: str | None = None,
    tile_memory: int = DEFAULT_TILE_MEMORY,
    tile: int | None = None,
    device: str = "cpu",
    max_candidates: int = 50_000_000,
    max_retries: int = MAX_RETRIES,
    rotate: bool | None = None,
    progress: bool = False,
    stats: dict | None = None,
    tmpdir: str | None = None,
    kernel: str | None = None,
    _crash_marker: str | None = None,
) -> PairSet:
    """find_pairs' result for in-memory arrays, as Ray tile tasks. The arrays are written once to a
    temporary folder (`tmpdir`, which every node must read: the default suits a local cluster) and the
    tasks read their blocks from there. tile: rows per tile side [default: from tile_memory]. kernel: the
    products kernel of every tile [default: each node's fastest, measured there]."""
    from vhmine.embed.rows import IndexRows, open_vectors
    from vhmine.mine.tilejob import TileJob

    ray = import_ray()
    if device != "cpu" and not device.startswith("cuda"):
        raise InputError(f"--device {device}: Ray tiles run on cpu or cuda (one GPU each)")
    device = "cuda" if device.startswith("cuda") else "cpu"  # a task sees only the GPU Ray gave it
    clip_min, dino_max = check_limits(clip_min, dino_max)
    clip, dino = _check(clip, dino)  # (rows whose norms the fast pass cannot bound are refused: rowcheck)
    if len(clip) < 2:
        return PairSet(*_EMPTY)
    side = tile or tile_rows(int(tile_memory), clip.shape[1], dino.shape[1])
    side = min(-(-side // _ALIGN) * _ALIGN, -(-len(clip) // _ALIGN) * _ALIGN)
    with tempfile.TemporaryDirectory(prefix="vhmine-ray-", dir=tmpdir) as tmp:
        for name, x in (("clip", clip), ("dino", dino)):
            np.save(Path(tmp) / f"{name}.npy", x)
        rows = IndexRows(open_vectors(Path(tmp) / "clip.npy"), open_vectors(Path(tmp) / "dino.npy"), None,
                         version=uuid.uuid4().hex)
        job = TileJob(Path(tmp) / "job", {"in_memory": True}).open()
        started = connect(ray, address)
        try:
            info = run_job(ray, rows, job, side=side, clip_min=float(clip_min), dino_max=float(dino_max), ranked=False,
                           device=device, max_candidates=max_candidates, max_retries=max_retries, rotate=rotate,
                           progress=progress, crash_marker=_crash_marker, resumable=False, kernel=kernel)
            parts = [job.rows(k)[:] for k in sorted(job.done)]
        finally:
            job.close()
            if started:
                ray.shutdown()
    pairs = merge([(p["i"], p["j"], p["clip"], p["dino"]) for p in parts if len(p)])
    log.debug("ray: %d tiles of %d rows, %d candidates, %d pairs", info["tiles"], side, info["candidates"], len(pairs))
    if stats is not None:
        stats.update(margin=info["margin"], candidates=info["candidates"], rotated=info["quantiser"]["rotated"],
                     blocks=info["tiles"], tile=side, quantiser=info["quantiser"], kernels=info["kernels"])
    return pairs
