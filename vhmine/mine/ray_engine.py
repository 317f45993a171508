"""`vhmine mine --engine ray`: simsearch.find_pairs' exact pair set, its tiles run as Ray tasks.

Reads the CLIP and DINOv2 rows it is given (mine.py reads them from the index); writes no files.
The driver quantises the CLIP rows once (simsearch.fast_pass) and puts the int8 rows and both
float32 arrays into Ray's object store once; each task mines one tile of the upper triangle (a
row block against a column block at or right of it) with simsearch.BlockMiner, the local miner's
own code, and returns only the pairs that pass the float64 re-check. So the pair set is the local
miner's, pair for pair, whatever the tile size or the order tasks finish in.

Memory: a tile's working set is simsearch.block_bytes(tile, width) (4.25 bytes a cell for the
product and its segment maxima, plus a copy of both row blocks) and 24 bytes per candidate; the tile
side is the largest multiple of 64 whose working set fits `tile_memory`, and each task asks Ray for
that much `memory`, so a node runs only as many tiles at once as it has memory for. Every node
also maps the shared arrays once: N x (CLIP dim x 5 + DINOv2 dim x 4) bytes.

Faults: a task whose worker process dies (killed, out of memory, node lost) is retried up to
`max_retries` times; a tile is pure, so a retry gives the same pairs.
"""

from __future__ import annotations

import logging
import math
import os

import numpy as np

from vhmine.errors import InputError, VhmineError
from vhmine.mine.simsearch import (
    _ALIGN, _EMPTY, BlockMiner, PairSet, _check, block_bytes, fast_pass, merge, tiles, too_many_candidates,
)

log = logging.getLogger(__name__)

DEFAULT_TILE_MEMORY = 1 << 30  # 1 GiB: a 15,680-row tile at 768 dims
MAX_RETRIES = 3


def tile_rows(tile_memory: int, width: int) -> int:
    """The largest multiple of 64 rows whose block_bytes fit tile_memory."""
    if block_bytes(_ALIGN, width) > tile_memory:
        raise InputError(
            f"--tile-memory {tile_memory / 2**20:.2f} MiB is too small: a tile of 64 rows at {width} dims needs "
            f"{block_bytes(_ALIGN, width) / 2**20:.2f} MiB; give at least that"
        )
    side = math.isqrt(int(tile_memory / 4.25)) // _ALIGN * _ALIGN
    while block_bytes(side, width) > tile_memory:
        side -= _ALIGN
    return side


def _mine_tile(q, clip, dino, r, c, tile, thresh, n, clip_min, dino_max, device, max_candidates, crash_marker):
    """One Ray task: the pairs of one tile that pass the exact re-check, and its candidate count."""
    import torch

    if crash_marker:  # the fault test: the first attempt of whichever tile starts first dies here
        try:
            os.close(os.open(crash_marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os._exit(1)
        except FileExistsError:
            pass
    dev = torch.device(device)
    miner = BlockMiner(clip, dino, clip_min, dino_max, thresh, n, device=dev, block=tile, width=q.shape[1])
    # copies of the two row blocks: the object store's arrays are read-only, which torch warns about
    x = torch.from_numpy(np.array(q[r:r + tile])).to(dev)
    y = x if c == r else torch.from_numpy(np.array(q[c:c + tile])).to(dev)
    with torch.inference_mode():
        i, j = miner.candidates(x, y, r, c)
    if len(i) > max_candidates:  # the driver stops the job: no re-check for pairs nobody will read
        return _EMPTY, len(i)
    return miner.recheck(i, j), len(i)


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


def _connect(ray, address: str | None) -> bool:
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


def _tile_failed(ray, err, max_retries: int) -> VhmineError:
    cause = getattr(err, "cause", None)
    if isinstance(err, ray.exceptions.RayTaskError) and cause is not None:  # raised in the task: not retried
        return VhmineError(f"a mining tile failed: {type(cause).__name__}: {cause}")
    return VhmineError(
        f"a mining tile failed after {max_retries} retries: {type(err).__name__}: {str(err).strip()[:300]}. "
        "If workers ran out of memory, lower --tile-memory; `ray status` shows the cluster's nodes"
    )


def find_pairs_ray(
    clip: np.ndarray,
    dino: np.ndarray,
    clip_min: float,
    dino_max: float = math.inf,
    *,
    address: str | None = None,
    tile_memory: int = DEFAULT_TILE_MEMORY,
    device: str = "cpu",
    max_candidates: int = 50_000_000,
    max_retries: int = MAX_RETRIES,
    rotate: bool | None = None,
    progress: bool = False,
    stats: dict | None = None,
    _crash_marker: str | None = None,
) -> PairSet:
    """find_pairs' result, computed as one Ray task per tile. device: what each task mines on ("cpu",
    or "cuda" to give each task one GPU). Raises InputError as find_pairs does, and VhmineError when a
    tile still fails after max_retries retries."""
    from tqdm import tqdm

    try:
        import ray
    except ImportError:
        raise InputError("--engine ray needs Ray: pip install 'vhmine[ray]' (or --engine local)") from None
    if device != "cpu" and not device.startswith("cuda"):
        raise InputError(f"--device {device}: Ray tiles run on cpu or cuda (one GPU each)")
    device = "cuda" if device.startswith("cuda") else "cpu"  # a task sees only the GPU Ray gave it
    clip, dino = _check(clip, dino)
    clip_min, dino_max = float(clip_min), float(dino_max)
    n = len(clip)
    if n < 2:
        return PairSet(*_EMPTY)
    width = -(-clip.shape[1] // 8) * 8
    tile = tile_rows(int(tile_memory), width)
    fp = fast_pass(clip, clip_min, rotate)
    tile = min(tile, len(fp.q))
    blocks = tiles(len(fp.q), tile)
    started = _connect(ray, address)
    try:
        task = ray.remote(_mine_tile).options(
            max_retries=max_retries, num_cpus=1, num_gpus=1 if device == "cuda" else 0,
            memory=block_bytes(tile, width),
        )
        shared = ray.put(fp.q), ray.put(clip), ray.put(dino)  # once: every task maps the same copy
        pending = [task.remote(*shared, r, c, tile, fp.thresh, n, clip_min, dino_max, device,
                               max_candidates, _crash_marker)
                   for r, c in blocks]
        found, total = [], 0
        with tqdm(total=len(blocks), desc="mining pairs (ray)", unit="tile", disable=not progress) as bar:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                try:
                    part, k = ray.get(done[0])
                except ray.exceptions.RayError as err:
                    _cancel(ray, pending)
                    raise _tile_failed(ray, err, max_retries) from None
                total += k
                if total > max_candidates:
                    _cancel(ray, pending)
                    raise too_many_candidates(total, clip_min, bar.n + 1, len(blocks), max_candidates)
                if len(part[0]):
                    found.append(part)
                bar.update(1)
    finally:
        if started:
            ray.shutdown()
    pairs = merge(found)
    log.debug("ray: %d tiles of %d rows, margin %.4f, %d candidates, %d pairs", len(blocks), tile, fp.margin, total,
              len(pairs))
    if stats is not None:
        stats.update(margin=fp.margin, candidates=total, rotated=fp.rotated, blocks=len(blocks), tile=tile)
    return pairs
