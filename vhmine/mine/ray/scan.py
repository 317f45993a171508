"""The first steps of a `vhmine mine --engine ray` job, on the driver: every node reads the index
(`probe_nodes`), then one streaming pass over every row (`scan`) fixes the quantisation of every tile and,
when asked, gives each row's digest (index.row_digests); a sample of the rows decides the pruning
(`prune_centres`: mine.join.prune's centres every tile's blocks are ordered by, or none).

Reads the index's headers and a sample of 4,096 rows of each side (the turn is chosen on them); the tasks
(tiletask.probe, tiletask.scan_chunk) read the rest. Writes through the job (mine.ray.tilejob): each scanned
chunk's line and digests as it arrives (so a stopped scan resumes from the chunks done, and the driver
holds bookkeeping per chunk, never per row), the turn, and the Quantiser once every chunk is in.
"""

from __future__ import annotations

import numpy as np

from vhmine.errors import InputError, VhmineError

MAX_RETRIES = 3
PROBE_TIMEOUT = 60.0  # seconds for every node to start a worker and read the index


def _cancel(ray, refs) -> None:
    # force: end the workers. A plain cancel interrupts a task wherever it is, even inside `import torch`,
    # and leaves that half-imported module in a worker that Ray then reuses for other tasks.
    for ref in refs:
        ray.cancel(ref, force=True)


def slots(ray, device: str) -> int:
    """How many tile tasks the cluster runs at once."""
    res = ray.cluster_resources()
    return max(1, int(res.get("GPU" if device == "cuda" else "CPU", 0)))


def probe_nodes(ray, rows, timeout: float = PROBE_TIMEOUT) -> list[str]:
    """Every alive node reads the index (tiletask.probe); raises InputError naming the first that cannot,
    or that does not answer within `timeout` seconds. Returns the nodes' addresses."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from vhmine.mine.ray import tiletask

    nodes = [nd for nd in ray.nodes() if nd.get("Alive")]
    task = ray.remote(num_cpus=0, max_retries=0)(tiletask.probe)
    refs = {
        task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(nd["NodeID"], soft=False)).remote(rows): nd.get(
            "NodeManagerAddress", nd["NodeID"]
        )
        for nd in nodes
    }
    ready, late = ray.wait(list(refs), num_returns=len(refs), timeout=timeout)
    hint = (
        "; mount the index at the same path on every node, or pass --index-url with a URL every node can read "
        "(s3://..., gs://..., file:///shared/...)"
    )
    for ref in ready:
        try:
            ray.get(ref)
        except ray.exceptions.RayError as err:
            cause = getattr(err, "cause", None) or err
            raise InputError(
                f"node {refs[ref]} cannot read the index: {type(cause).__name__}: {str(cause).strip()[:300]}{hint}"
            ) from None
    if late:
        _cancel(ray, late)
        raise InputError(
            f"node {refs[late[0]]} did not read the index within {timeout:g} s (is vhmine installed "
            f"there, and does the node have a free worker?){hint}"
        )
    return sorted(refs.values())


def scan(
    ray,
    rows,
    job,
    side: int,
    rotate: bool | None,
    progress: bool,
    local=None,
    device: str = "cpu",
    kernel: str | None = None,
    *,
    rows_b=None,
    local_b=None,
    digests: bool = False,
):
    """The Quantiser of every row of rows (and of rows_b, a rectangle's second index: one for all tiles),
    from one task per chunk of `side` rows (with digests: rounded up to whole chunks of the index's kept
    digests, vhmine.index.CHUNK_ROWS, which the tasks read where they still check), with the fewest levels
    that the nodes' products kernels keep exact (each task's node chooses its own). The turn is chosen by the
    driver on a sample of each side, read from `local` / `local_b` (its own view of the index). Each chunk is
    recorded in `job` as it arrives (with its row digests when `digests`): chunks already recorded are not
    scanned again, and a recorded Quantiser is kept (then only chunks whose digests are missing are scanned)."""
    from tqdm import tqdm

    from vhmine.index import CHUNK_ROWS
    from vhmine.mine.join import Quantiser, choose_turn, sample_rows
    from vhmine.mine.ray import tiletask

    step = -(-side // CHUNK_ROWS) * CHUNK_ROWS if digests else side  # (a chunk of kept digests is in one task)
    sides = [("a", rows)] + ([("b", rows_b)] if rows_b is not None else [])
    done = Quantiser.from_dict(job.job["quantiser"]) if "quantiser" in job.job else None
    every = [(name, r, s) for name, r in sides for s in range(0, r.n, step)]

    def needed(name: str, s: int) -> bool:  # its digests are wanted and missing, or the quantiser needs it
        e = job.chunks.get((name, s))
        return (digests and "file" not in (e or {})) or (done is None and e is None)

    chunks = [(name, r, s) for name, r, s in every if needed(name, s)]
    if done is not None and not chunks:
        return done
    if done is not None or "turn" in job.job:  # (chunks scanned again for their digests: the recorded turn)
        dims = done.dims if done is not None else tuple(job.job["turn"])
    else:
        views = [(local or rows), (local_b or rows_b)][: len(sides)]
        dims = choose_turn(np.concatenate([v.clip.take(sample_rows(v.n)) for v in views]), rotate)
        job.save(turn=list(dims))
    dim = rows.clip.dim
    task = ray.remote(tiletask.scan_chunk).options(
        num_cpus=1, max_retries=MAX_RETRIES, memory=16 * step * (dim + rows.dino.dim)
    )
    inflight, at = {}, 0
    with tqdm(total=len(chunks), desc="scanning rows (ray)", unit="chunk", disable=not progress) as bar:
        while at < len(chunks) or inflight:
            while at < len(chunks) and len(inflight) < 2 * slots(ray, "cpu") + 2:
                name, r, s = chunks[at]
                inflight[task.remote(r, s, s + step, dims, kernel, device, digests)] = (name, s, min(s + step, r.n))
                at += 1
            ready, _ = ray.wait(list(inflight), num_returns=1)
            name, s, e = inflight.pop(ready[0])
            try:
                a, lv, *dg = ray.get(ready[0])  # (with digests: the rows' digests, and what they cost)
            except ray.exceptions.RayTaskError as err:  # a row the chunk refused (rowcheck): its own line
                _cancel(ray, list(inflight))
                if isinstance(getattr(err, "cause", None), VhmineError):
                    raise type(err.cause)(str(err.cause)) from None
                raise
            job.record_chunk(name, s, e, {"amax": float(a), "levels": int(lv), **(dg[1] if dg else {})}, *dg[:1])
            bar.update(1)
    if done is not None:
        return done
    entries = [job.chunks[(name, s)] for name, _, s in every]
    qz = Quantiser.from_scan(dim, max(e["amax"] for e in entries), dims, min(e["levels"] for e in entries))
    job.save(quantiser=qz.as_dict())
    return qz


def prune_centres(rows, rows_b, local, local_b, qz, side: int, clip_min: float, prune):
    """The driver's pruning choice (mine.join.prune.tile_centres) on a sample of each side's rows, quantised
    as the tiles will be: (int8 centres or None, its record)."""
    from vhmine.mine.join import quantise_block, sample_rows, threshold, tile_centres

    if prune is False:
        return tile_centres(np.zeros((0, 8), np.int8), 0, side, 0, False)
    views = [local or rows] + ([local_b or rows_b] if rows_b is not None else [])
    x = np.concatenate([v.clip.take(sample_rows(v.n)) for v in views])  # (in row order: A's, then B's)
    q, stats = quantise_block(x, qz)
    return tile_centres(q[: len(x)], sum(v.n for v in views), side, threshold(qz, stats, clip_min)[0], prune)
