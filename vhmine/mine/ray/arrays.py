"""`vhmine mine --engine ray` on in-memory arrays (tests, benchmarks): find_pairs_ray (every pair, or with
new_rows those touching new rows) and find_pairs_across_ray (the pairs across two sets of rows), simsearch's
pair sets as Ray tile tasks. The arrays are written once to a temporary folder that every node reads (the
default suits a local cluster), and run_job (mine.ray.engine) mines its tiles from there; nothing else is
written.
"""

from __future__ import annotations

import logging
import math
import tempfile
import uuid
from pathlib import Path

import numpy as np

from vhmine.errors import InputError
from vhmine.mine.join import ALIGN, PairSet, check_limits, check_rows, merge, no_pairs
from vhmine.mine.ray.engine import DEFAULT_TILE_MEMORY, connect, import_ray, run_job, tile_rows
from vhmine.mine.ray.scan import MAX_RETRIES

log = logging.getLogger("vhmine.mine.ray.engine")


def _options(device: str, clip_min, dino_max) -> tuple[str, float, float]:
    if device != "cpu" and not device.startswith("cuda"):
        raise InputError(f"--device {device}: Ray tiles run on cpu or cuda (one GPU each)")
    clip_min, dino_max = check_limits(clip_min, dino_max)
    device = "cuda" if device.startswith("cuda") else "cpu"  # a task sees only the GPU Ray gave it
    return device, float(clip_min), float(dino_max)


def _written(sides: list, folder: Path) -> list:
    """Each side's (clip, dino) arrays saved into folder as .npy files, and opened as the rows tasks read."""
    from vhmine.index import IndexRows, open_vectors

    views = []
    for s, (clip, dino) in enumerate(sides):
        for name, x in (("clip", clip), ("dino", dino)):
            np.save(folder / f"{name}{s}.npy", x)
        vectors = open_vectors(folder / f"clip{s}.npy"), open_vectors(folder / f"dino{s}.npy")
        views.append(IndexRows(*vectors, None, version=uuid.uuid4().hex))
    return views


def _in_memory(
    sides: list,
    make_shape,
    clip_min: float,
    dino_max: float,
    *,
    address,
    tile_memory,
    tile,
    device,
    max_candidates,
    max_retries,
    rotate,
    progress,
    stats,
    tmpdir,
    kernel,
    crash_marker,
    prune=None,
) -> PairSet:
    """A plain job over in-memory (clip, dino) arrays of one side, or two (a rectangle): they are written
    once to a temporary folder (`tmpdir`, which every node must read) and the tasks read them there."""
    from vhmine.mine.ray.tilejob import TileJob

    ray = import_ray()
    n = max(len(c) for c, _ in sides)
    side = tile or tile_rows(int(tile_memory), sides[0][0].shape[1], sides[0][1].shape[1])
    side = min(-(-side // ALIGN) * ALIGN, -(-n // ALIGN) * ALIGN)
    shape = make_shape(side)
    if not len(shape):
        return no_pairs()
    with tempfile.TemporaryDirectory(prefix="vhmine-ray-", dir=tmpdir) as tmp:
        views = _written(sides, Path(tmp))
        job = TileJob(Path(tmp) / "job", {"in_memory": True}).open()
        started = connect(ray, address)
        try:
            info = run_job(
                ray,
                views[0],
                job,
                side=side,
                clip_min=clip_min,
                dino_max=dino_max,
                ranked=False,
                device=device,
                max_candidates=max_candidates,
                max_retries=max_retries,
                rotate=rotate,
                progress=progress,
                crash_marker=crash_marker,
                resumable=False,
                kernel=kernel,
                shape=shape,
                rows_b=views[1] if len(views) > 1 else None,
                prune=prune,
            )
            parts = [job.rows(k)[:] for k in sorted(job.done)]
        finally:
            job.close()
            if started:
                ray.shutdown()
    pairs = merge([(p["i"], p["j"], p["clip"], p["dino"]) for p in parts if len(p)])
    log.debug("ray: %d tiles of %d rows, %d candidates, %d pairs", info["tiles"], side, info["candidates"], len(pairs))
    if stats is not None:
        stats.update(margin=info["margin"], candidates=info["candidates"], rotated=info["quantiser"]["rotated"])
        stats.update(blocks=info["tiles"], tile=side, quantiser=info["quantiser"], kernels=info["kernels"])
        stats.update(prune=info["prune"])
    return pairs


def find_pairs_ray(
    clip: np.ndarray,
    dino: np.ndarray,
    clip_min: float,
    dino_max: float = math.inf,
    *,
    new_rows=None,
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
    prune: bool | None = None,
    _crash_marker: str | None = None,
) -> PairSet:
    """find_pairs' result for in-memory arrays, as Ray tile tasks. The arrays are written once to a
    temporary folder (`tmpdir`, which every node must read: the default suits a local cluster) and the
    tasks read their blocks from there. new_rows: only the pairs i < j that touch one of these rows
    (a tileshapes.Band) [default: every pair]. tile: rows per tile side [default: from tile_memory].
    kernel: the products kernel of every tile [default: each node's fastest, measured there]. prune: see
    run_job."""
    from vhmine.mine.ray.tileshapes import Band, Triangle, new_rows_array

    device, clip_min, dino_max = _options(device, clip_min, dino_max)
    clip, dino = check_rows(clip, dino)  # (rows whose norms the fast pass cannot bound are refused: rowcheck)
    if new_rows is not None:
        try:
            new = new_rows_array(new_rows, len(clip))
        except ValueError as err:
            raise InputError(str(err)) from None
    if len(clip) < 2:
        return no_pairs()
    shape = (lambda side: Triangle(len(clip), side)) if new_rows is None else (lambda side: Band(len(clip), side, new))
    return _in_memory(
        [(clip, dino)],
        shape,
        clip_min,
        dino_max,
        address=address,
        tile_memory=tile_memory,
        tile=tile,
        device=device,
        max_candidates=max_candidates,
        max_retries=max_retries,
        rotate=rotate,
        progress=progress,
        stats=stats,
        tmpdir=tmpdir,
        kernel=kernel,
        crash_marker=_crash_marker,
        prune=prune,
    )


def find_pairs_across_ray(
    clip_a: np.ndarray,
    dino_a: np.ndarray,
    clip_b: np.ndarray,
    dino_b: np.ndarray,
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
    prune: bool | None = None,
    _crash_marker: str | None = None,
) -> PairSet:
    """Every pair (row i of A, row j of B) with CLIP cosine >= clip_min and DINOv2 <= dino_max, exactly,
    as Ray tile tasks over a tileshapes.Rectangle: a PairSet whose i are rows of A and j rows of B, sorted
    by (i, j) (so i < j does not hold). One Quantiser for both sides. Options as find_pairs_ray's."""
    from vhmine.mine.ray.tileshapes import Rectangle

    device, clip_min, dino_max = _options(device, clip_min, dino_max)
    clip_a, dino_a = check_rows(clip_a, dino_a)
    clip_b, dino_b = check_rows(clip_b, dino_b)
    for name, a, b in (("clip", clip_a, clip_b), ("dino", dino_a, dino_b)):
        if a.shape[1] != b.shape[1]:
            raise InputError(
                f"{name} vectors of A have {a.shape[1]} dims, of B {b.shape[1]}: mine across indexes "
                "made with the same encoders"
            )
    return _in_memory(
        [(clip_a, dino_a), (clip_b, dino_b)],
        lambda side: Rectangle(len(clip_a), len(clip_b), side),
        clip_min,
        dino_max,
        address=address,
        tile_memory=tile_memory,
        tile=tile,
        device=device,
        max_candidates=max_candidates,
        max_retries=max_retries,
        rotate=rotate,
        progress=progress,
        stats=stats,
        tmpdir=tmpdir,
        kernel=kernel,
        crash_marker=_crash_marker,
        prune=prune,
    )
