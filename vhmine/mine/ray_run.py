"""The Ray engine (RayEngine, mine.engine's interface): `vhmine mine --engine ray`, the exact join's blocks as
Ray tasks over tiles (mine.ray) of the plan's shape: the triangle of one index, the band of a grown index's new
rows (the plan holds an earlier run of the same command: mine.grow), or the rectangle of `--against`.

Reads the index by row range (vhmine.index rows; the driver reads headers, a row sample, the rows of random
pairs for the scatter's background and, batch by batch, images.parquet), never whole: a band's rows are joined
with the earlier run's, and `--against`'s two indexes' images with each other, by image id in buckets on disk
(mine.growjoin and mine.idjoin, under `runs/.<run>.job.ids/`, removed when the engine is done), so the
driver's memory does not grow with the collection. Writes the job folder (RunPlan.job_dir, `runs/.<run>.job/`) while
the job runs (mine.ray.TileJob: a stopped job resumes from it), and into the temporary folder publish hands to
Mined.write_pairs the pairs merged in rank order and capped (mine.ray's merge), written in shards
(mine.pairwriter.PairWriter), with rows.parquet and alike.parquet streamed (mine.state); the job folder goes once
the run folder is in place (Mined.done). Knows no run folder; the local engine (mine.local_run) is its sibling.

The pairs equal `--engine local`'s, row for row: the same pair set (exact), the same ranking and caps; so do the
summary's lines (the caps' cuts, mine.rank.record_cuts; a run with no pair in the box: mine.relax's nearby counts,
when the tiles hold every CLIP-alike pair) and the scatter's points (less a rectangle's dropped pairs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from vhmine.errors import InputError
from vhmine.mine.engine import Mined

if TYPE_CHECKING:
    from vhmine.mine.growjoin import GrowthJoin

FORMAT = 1
OLD_PAIRS = -1  # the job's entry for the earlier run's pairs that a band job reuses (a tile file like the others)

log = logging.getLogger("vhmine.mine.job")


class RayEngine:
    """The join's tiles as Ray tasks (mine.ray), the driver never holding the vectors."""

    name = "ray"

    def mine(self, plan) -> Mined:
        """The plan's pairs (mine.plan.RunPlan), ranked and capped by the merge of the job's tiles."""
        setup = _setup(plan)
        try:
            job, info = _run(plan, setup)
            try:
                return _mined(plan, setup, job, info)
            except _Changed:  # the band was mined on a basis that does not hold: mine everything
                job.remove()
                return self.mine(plan.full())
            except BaseException:
                job.close()
                raise
        finally:
            if setup.grown is not None:
                setup.grown.remove()


class _Changed(Exception):
    pass


@dataclass
class _Setup:
    """What the job is: its rows (as workers and as the driver read them), B's rows, the tile side, the
    shape of tiles, the images in both indexes (Across), a tile's own cut (top), the index's ids (a band)."""

    device: str
    rows: object
    local: object
    rows_b: object
    side: int
    shape: object
    across: object
    top: int | None
    grown: GrowthJoin | None


def device_of(opts) -> str:
    device = opts.device or "cpu"
    if device != "cpu" and not device.startswith("cuda"):
        raise InputError(f"--device {device}: Ray tiles run on cpu or cuda (one GPU each)")
    return "cuda" if device.startswith("cuda") else "cpu"  # a task sees only the GPU Ray gave it


def rows_of(idx, opts, ids: bool = True):
    """(rows as the workers read them, rows as the driver reads them: its local copy)."""
    from vhmine.index import index_rows

    rows = index_rows(idx.folder, url=opts.index_url, ids=ids)
    return rows, (index_rows(idx.folder, ids=ids) if opts.index_url else rows)


def tile_side(opts, rows, rows_b=None) -> int:
    from vhmine.mine.ray import DEFAULT_TILE_MEMORY, tile_rows

    side = tile_rows(int(opts.tile_memory or DEFAULT_TILE_MEMORY), rows.clip.dim, rows.dino.dim)
    return min(side, -(-max(rows.n, rows_b.n if rows_b is not None else 0) // 64) * 64)


def _setup(plan) -> _Setup:
    from vhmine.index import index_rows
    from vhmine.mine.growjoin import GrowthJoin
    from vhmine.mine.idjoin import Across
    from vhmine.mine.ray import Band, Rectangle, Triangle

    opts, against, earlier = plan.ctx.opts, plan.b, plan.earlier
    device = device_of(opts)
    rows, local = rows_of(plan.a, opts)
    rows_b = index_rows(against.folder) if against is not None else None  # (--index-url names A's copy)
    side = tile_side(opts, rows, rows_b)
    scratch = plan.job_dir.with_name(plan.job_dir.name + ".ids")  # the streamed joins' buckets (mine.idjoin)
    across = Across(local, rows_b, scratch) if against is not None else None  # (images in both: mine.join.shared)
    # only then may a tile cut its own list (not when pairs of images in both indexes are dropped after it)
    top = opts.max_pairs if not opts.max_per_image and not (across and across.shared) else None
    grown = GrowthJoin(earlier, local, scratch) if earlier is not None else None
    if grown is not None:
        shape = Band(rows.n, side, grown.new_rows)  # (its kept rows' digests are checked after the scan)
    elif against is not None:
        shape = Rectangle(rows.n, rows_b.n, side)
    else:
        shape = Triangle(rows.n, side)
    return _Setup(device, rows, local, rows_b, side, shape, across, top, grown)


def _identity(plan, s: _Setup) -> dict:
    """What the job folder must match to be resumed."""
    from vhmine.index import manifest_sha256

    opts = plan.ctx.opts
    return {
        "format": FORMAT,
        "index_manifest_sha256": manifest_sha256(plan.a.folder),
        "rows": s.rows.n,
        "clip": opts.clip,
        "dino": opts.dino,
        "tile": s.side,
        "top": s.top,
        "shape": s.shape.record(),
        "from": plan.earlier.run["run_id"] if plan.earlier is not None else None,
        "against": manifest_sha256(plan.b.folder) if plan.b is not None else None,
    }


def _run(plan, s: _Setup):
    """The job run on the cluster: (its TileJob, run_job's report)."""
    from vhmine.mine.ray import TileJob, connect, import_ray, run_job

    opts = plan.ctx.opts
    ray = import_ray()
    identity = _identity(plan, s)
    started = connect(ray, opts.ray_address)  # a wrong address is named before anything is written
    job = None
    try:
        job = TileJob(plan.job_dir, identity).open()
        info = run_job(
            ray,
            s.rows,
            job,
            side=s.side,
            clip_min=opts.clip,
            dino_max=opts.dino,
            ranked=True,
            top=s.top,
            device=s.device,
            only=opts.tiles,
            progress=opts.progress,
            local=s.local,
            kernel=opts.kernel,
            shape=s.shape,
            rows_b=s.rows_b,
            local_b=s.rows_b,
            keep_alike=True,
            digests=plan.b is None,
            prune=opts.prune,
        )
        if plan.b is None:
            info["digests"] = _keep_digests(plan, s, job)
    except BaseException as err:
        # scanned chunks are kept for a rerun after a stop, not after a refusal (a row, say): it would refuse again
        kept = job is not None and (
            job.done or "quantiser" in job.job or (job.chunks and not isinstance(err, InputError))
        )
        if job is not None and not kept:
            job.remove()  # nothing worth keeping (a node could not read the index, say)
        elif job is not None:
            job.close()
        raise
    finally:
        if started:
            ray.shutdown()
    return job, info


def _keep_digests(plan, s: _Setup, job) -> dict:
    """The index's kept row digests (vhmine.index.store_streamed: what the local engine keeps, so either engine
    reads them next time) written again from the scan's chunks, a chunk at a time, when the scan hashed any row
    (the others it read from the kept file where their chunk's check held). Returns run.json's ray.digests."""
    from vhmine.index import DIGEST, store_streamed

    entries = sorted((e for (side, _), e in job.chunks.items() if side == "a"), key=lambda e: e["start"])
    digested = sum(int(e.get("digested", e["stop"] - e["start"])) for e in entries)
    if digested and all("checks" in e for e in entries):
        checks = (np.frombuffer(bytes.fromhex(c), np.uint8) for e in entries for c in e["checks"])
        dims = (s.rows.clip.dim, s.rows.dino.dim)
        store_streamed(plan.a.folder, DIGEST, dims, s.rows.n, job.digest_parts("a", s.rows.n), checks)
    return {"rows_digested": digested, "rows_stored": s.rows.n - digested}


def _mined(plan, s: _Setup, job, info) -> Mined:
    """What the finished job holds, as Mined: its tiles (and a band's earlier pairs) merged in rank order."""
    from vhmine.mine.ray import SCATTER_POINTS, scatter_points, shared_drops

    opts, earlier, across = plan.ctx.opts, plan.earlier, s.across
    reuse, extra, old = "", {}, {"clip_alike": 0, "in_box": 0, "entries": []}
    if earlier is not None:
        reuse, extra, old = _band(plan, s, job)
    wanted = [k for k in (range(len(s.shape)) if opts.tiles is None else sorted(set(opts.tiles))) if k in job.done]
    merged = wanted + old["entries"]
    drop, less_alike, less_box = set(), 0, 0
    if across and across.shared:  # no pair of an image with itself, each unordered pair once
        drop, less_alike, less_box = shared_drops(job, wanted, across.shared_bytes, opts.dino)
    n_b = s.rows_b.n if across else None
    counts = {
        "images": s.rows.n + (n_b or 0),
        **({"images_a": s.rows.n, "images_b": n_b, "shared_images": across.shared} if across else {}),
        "clip_alike": info["clip_alike"] + old["clip_alike"] - less_alike,
        "in_box": info["in_box"] + old["in_box"] - less_box,
    }
    record = {"tiles": info["tiles"], "tiles_mined": len(wanted), "tile_rows": s.side, "shape": s.shape.kind}
    record.update(quantiser=info["quantiser"], nodes=len(info["nodes"]), tiles_done_before=info["tiles_done_before"])
    record.update(kernels=info["kernels"], pruning=info["prune"], digests=info.get("digests"))
    kernels = ", ".join(f"{k} ({v['tiles']} tiles)" for k, v in info["kernels"].items())
    b = plan.b
    background, cuts = _background(s), {}  # (cuts: filled as the pairs are written, as the local engine's)
    relax, nearby = _relax(plan, s, job, merged, drop, counts, background)
    return Mined(
        plan.a.name if b is None else f"{plan.a.name} x {b.name}",
        counts,
        _pairs_writer(plan, s, job, merged, drop, cuts, counts["in_box"]),
        scatter_points(job, merged, SCATTER_POINTS, drop),
        background,
        extra={"ray": record, **extra, **nearby},
        pairs=across.pairs if across else None,
        title=f"{plan.a.name} x {b.name}" if b is not None else None,
        kernel=f"products kernels the nodes chose: {kernels}" if kernels else "",
        reuse=reuse,
        relax=relax,
        cuts=cuts,
        shared=across.shared if across else 0,
        job=info,
        done=job.remove,
        failed=job.close,
    )


def _band(plan, s: _Setup, job):
    """A band's growth checked against the rows' digests the scan recorded (_Changed when a kept row's vectors
    changed), and the earlier run's pairs recorded as one more entry of the job: (the reuse line, run.json's
    `incremental`, the earlier pairs' counts)."""
    from vhmine.mine.grow import changed_line, said

    earlier = plan.earlier
    g = s.grown.growth(job.digest_parts("a", s.rows.n))
    if g.changed:
        log.warning("%s", changed_line(g, plan.a, earlier.folder))
        raise _Changed
    old = _record_old_pairs(job, s.grown, s.local, plan.ctx.opts, s.top)
    k_new = len(g.new_rows)
    products = k_new * (k_new - 1) // 2 + k_new * g.kept
    record = {**g.record(earlier, products), "join": s.grown.stats}  # (the streamed join's cost: docs/scaling.md)
    return said(earlier, g, products, s.rows.n), {"incremental": record}, old


def _relax(plan, s: _Setup, job, merged: list, drop: set, counts: dict, background):
    """A run with no pair in the box: what to relax (mine.relax, as the local engine says it), as (lines,
    run.json's `nearby`), when the job's files hold every CLIP-alike pair (a tile keeps only a sample of those
    outside the box when they are many: then ([], {}))."""
    from vhmine.mine.background import BACKGROUND_PAIRS
    from vhmine.mine.join import PairSet
    from vhmine.mine.ray import scatter_points
    from vhmine.mine.relax import for_run

    every = all(job.done[k]["kept"] + job.done[k]["sample"] == job.done[k]["clip_alike"] for k in merged)
    if counts["in_box"] or not every:
        return [], {}
    c, d = scatter_points(job, merged, max(1, counts["clip_alike"]) * max(1, len(merged)), drop)
    none = np.zeros(len(c), np.int64)
    found = PairSet(none, none, c, d)
    opts, name, n = plan.ctx.opts, plan.a.name, s.rows.n
    if s.across is None:
        return for_run(found, background, n, opts, name, all_pairs=n * (n - 1) // 2 <= BACKGROUND_PAIRS)
    nb = s.rows_b.n
    return for_run(found, background, n + nb, opts, name, all_pairs=n * nb <= BACKGROUND_PAIRS, pairs=s.across.pairs)


def _pairs_writer(plan, s: _Setup, job, merged: list, drop: set, cuts: dict, in_box: int):
    """Mined.write_pairs: the merged tiles' pairs, capped, in shards (and one index's growth state, streamed);
    `cuts` gets what each cap left out of the `in_box` pairs (mine.rank.record_cuts)."""
    from vhmine.mine import state
    from vhmine.mine.pairwriter import PairWriter
    from vhmine.mine.rank import record_cuts
    from vhmine.mine.ray import capped, ranked, without

    opts, idx, against = plan.ctx.opts, plan.a, plan.b

    def write_pairs(tmp: Path):
        side_b = (against.images_file, against.locations) if against is not None else None
        columns = {"index_a": idx.name, "index_b": against.name} if against is not None else None
        writer = PairWriter(
            tmp, idx.images_file, idx.locations, head_rows=opts.gallery_size, side_b=side_b, columns=columns
        )
        tally, kept = {}, 0
        for chunk in capped(
            without(ranked(job, merged, plan.job_dir / "merge"), drop),
            max_per_image=opts.max_per_image,
            max_pairs=opts.max_pairs,
            tally=tally,
        ):
            writer.add(chunk)
            kept += len(chunk)
        record_cuts(cuts, in_box, tally["per_image"], kept, opts.max_per_image, opts.max_pairs)
        if against is None:
            state.write_rows_streamed(tmp, _id_parts(s.local), job.digest_parts("a", s.rows.n))
            with state.AlikeWriter(tmp) as w:
                for k in merged:
                    for part in _tile_chunks(job, k):
                        w.add(_text(part["id_a"]), _text(part["id_b"]), part["clip"], part["dino"])
        return writer.close(), writer.head

    return write_pairs


def _background(s: _Setup):
    """The scatter's background: random pairs' sims, their rows read from the vector files batch by batch."""
    from vhmine.mine.background import background_sample, cross_sims, file_sims

    local, rows_b, across = s.local, s.rows_b, s.across
    if across is None:
        return background_sample(local.n, lambda i, j: (file_sims(local.clip, i, j), file_sims(local.dino, i, j)))

    def sims(i, j):
        i, j = across.kept(i, j)  # (reads the sampled rows' ids: once for both encoders)
        return cross_sims(local.clip.take, rows_b.clip.take, i, j), cross_sims(local.dino.take, rows_b.dino.take, i, j)

    return background_sample(local.n, sims, across=rows_b.n)


def _id_parts(rows, batch: int = 65_536):
    """Every row's image id in row order, a batch of images.parquet at a time (arrow strings)."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(rows.images, buffer_size=1 << 20, pre_buffer=False)  # streamed, not a row group at once
    for b in pf.iter_batches(batch_size=batch, columns=["image_id"]):
        yield b.column(0)


def _text(ids: np.ndarray) -> np.ndarray:
    return np.char.decode(ids, "utf-8").astype(object) if len(ids) else np.empty(0, object)


def _tile_chunks(job, k: int, step: int = 1 << 20):
    rows = job.rows(k)
    for s in range(0, len(rows), step):
        yield rows[s : s + step]


def _record_old_pairs(job, grown, local, opts, top: int | None) -> dict:
    """The earlier run's CLIP-alike pairs between rows still there, as more ranked entries of the job, one per
    bucket of the streamed join (OLD_PAIRS, OLD_PAIRS - 1, ...: each its in-box pairs in rank order, cut to
    `top` as a tile's are, then the rest): the merge and the scatter read them as tiles. Returns their counts
    and entries."""
    from vhmine.mine.ray import box_first, orient_by_id, ranked_dtype

    width, counts = local.id_width, {"clip_alike": 0, "in_box": 0, "entries": []}
    for q, (i, j, c, d, id_i, id_j) in enumerate(grown.old_pairs()):
        out = np.empty(len(i), ranked_dtype(width))
        orient_by_id(out, i, j, np.asarray(id_i, dtype=f"S{width}"), np.asarray(id_j, dtype=f"S{width}"))
        out["clip"], out["dino"], out["gap"], out["lo"], out["hi"] = c, d, c - d, i, j
        box = d <= opts.dino
        rows, kept, others = box_first(out, box, top)
        info = {"kept": kept, "sample": others, "clip_alike": len(out), "in_box": int(box.sum())}
        job.record(OLD_PAIRS - q, rows, info)
        counts["clip_alike"] += len(out)
        counts["in_box"] += info["in_box"]
        counts["entries"].append(OLD_PAIRS - q)
    return counts
