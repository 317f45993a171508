"""`vhmine mine --engine ray`: the run folder of a Ray job, and `--plan`, which sizes the job first.

Reads the index by row range (vhmine.index.rows; the driver reads headers, a row sample, the rows of random
pairs for the scatter's background and, batch by batch, images.parquet), never whole (only a growth run's
band holds every image id and digest, to find its new rows: mine.grow). Writes the job
folder `runs/.<run>.job/` while the job runs (mine.ray.tilejob: a stopped job resumes from it), then the run
folder through runfolder.finish_run, with pairs merged in rank order (mine.merge) and written in shards
(mine.write); the job folder goes once the run folder is in place.

The pairs equal `--engine local`'s, row for row: the same pair set (exact), the same ranking and caps.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vhmine.errors import InputError

FORMAT = 1


def _device(opts) -> str:
    device = opts.device or "cpu"
    if device != "cpu" and not device.startswith("cuda"):
        raise InputError(f"--device {device}: Ray tiles run on cpu or cuda (one GPU each)")
    return "cuda" if device.startswith("cuda") else "cpu"  # a task sees only the GPU Ray gave it


def _rows(idx, opts, ids: bool = True):
    """(rows as the workers read them, rows as the driver reads them: its local copy)."""
    from vhmine.index import index_rows

    rows = index_rows(idx.folder, url=opts.index_url, ids=ids)
    return rows, (index_rows(idx.folder, ids=ids) if opts.index_url else rows)


def _side(opts, rows, rows_b=None) -> int:
    from vhmine.mine.ray.engine import DEFAULT_TILE_MEMORY, tile_rows

    side = tile_rows(int(opts.tile_memory or DEFAULT_TILE_MEMORY), rows.clip.dim, rows.dino.dim)
    return min(side, -(-max(rows.n, rows_b.n if rows_b is not None else 0) // 64) * 64)


def _sims(vf, i, j, step: int = 4096) -> np.ndarray:
    """simsearch.pair_sims of rows i, j of a vector file, fetched a batch at a time."""
    from vhmine.mine.join import pair_sims

    out = np.empty(len(i))
    for s in range(0, len(i), step):
        a, b = i[s : s + step], j[s : s + step]
        uniq = np.unique(np.concatenate([a, b]))
        out[s : s + step] = pair_sims(vf.take(uniq), np.searchsorted(uniq, a), np.searchsorted(uniq, b))
    return out


def mine_ray(
    idx, opts, run_dir: Path, warnings: list[str], t0: float, *, default_dir: Path | None = None, against=None
):
    """The run folder of a Ray job: the triangle of `idx`, or only its new rows' band when an earlier run of
    the same command can be reused (mine.grow), or the rectangle idx x `against` (an opened index)."""
    import logging

    from vhmine.index import index_rows, manifest_sha256
    from vhmine.mine import grow, state
    from vhmine.mine.ray.engine import SCATTER_POINTS, connect, import_ray, run_job
    from vhmine.mine.ray.merge import Across, capped, ranked, scatter_points, shared_drops, without
    from vhmine.mine.ray.tilejob import TileJob
    from vhmine.mine.ray.tileshapes import Band, Rectangle, Triangle
    from vhmine.mine.runfolder import MineResult, against_record, background_sample, cross_sims, finish_run, job_folder
    from vhmine.mine.write import PairWriter

    log = logging.getLogger("vhmine.mine.job")
    ray = import_ray()
    device = _device(opts)
    rows, local = _rows(idx, opts)
    rows_b = index_rows(against.folder) if against is not None else None  # (--index-url names A's copy)
    side = _side(opts, rows, rows_b)
    across = Across(local, rows_b) if against is not None else None  # (images in both: mine.join.shared)
    # only then may a tile cut its own list (not when pairs of images in both indexes are dropped after it)
    top = opts.max_pairs if not opts.max_per_image and not (across and across.shared) else None
    earlier, why = None, ""
    folder = None if (opts.full or against is not None) else grow.earlier_run(run_dir, default_dir or run_dir)
    if folder is not None:
        earlier, why = grow.reusable(folder, idx, opts)
        if why:
            log.warning("%s", why)
    ids = _all_ids(local) if earlier is not None else None
    if earlier is not None:
        shape = Band(rows.n, side, grow.new_rows(earlier, ids))  # (its kept rows' digests are checked after the scan)
    elif against is not None:
        shape = Rectangle(rows.n, rows_b.n, side)
    else:
        shape = Triangle(rows.n, side)
    identity = {
        "format": FORMAT,
        "index_manifest_sha256": manifest_sha256(idx.folder),
        "rows": rows.n,
        "clip": opts.clip,
        "dino": opts.dino,
        "tile": side,
        "top": top,
        "shape": shape.record(),
        "from": earlier.run["run_id"] if earlier is not None else None,
        "against": manifest_sha256(against.folder) if against is not None else None,
    }
    jf = job_folder(run_dir)
    started = connect(ray, opts.ray_address)  # a wrong address is named before anything is written
    job = None
    try:
        job = TileJob(jf, identity).open()
        info = run_job(
            ray,
            rows,
            job,
            side=side,
            clip_min=opts.clip,
            dino_max=opts.dino,
            ranked=True,
            top=top,
            device=device,
            only=opts.tiles,
            progress=opts.progress,
            local=local,
            kernel=opts.kernel,
            shape=shape,
            rows_b=rows_b,
            local_b=rows_b,
            keep_alike=True,
            digests=against is None,
            prune=opts.prune,
        )
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
    digests = job.digests("a", rows.n) if earlier is not None else None  # (a full mine streams them into rows.parquet)
    g, reuse, extra_counts = None, "", {"clip_alike": 0, "in_box": 0}
    if earlier is not None:
        g = grow.growth(earlier, ids, digests)
        if g.changed:  # the band was mined on a basis that does not hold: mine everything
            log.warning("%s", grow.changed_line(g, idx, earlier.folder))
            job.remove()
            return mine_ray(idx, dataclasses.replace(opts, full=True), run_dir, warnings, t0, default_dir=default_dir)
        extra_counts = _record_old_pairs(job, earlier, ids, local, opts, top)
    try:
        wanted = [k for k in (range(len(shape)) if opts.tiles is None else sorted(set(opts.tiles))) if k in job.done]
        merged = wanted + ([OLD_PAIRS] if earlier is not None else [])
        drop, less_alike, less_box = set(), 0, 0
        if across and across.shared:  # no pair of an image with itself, each unordered pair once
            drop, less_alike, less_box = shared_drops(job, wanted, across.shared_bytes, opts.dino)

        def write_pairs(tmp: Path):
            side_b = (against.images_file, against.location) if against is not None else None
            columns = {"index_a": idx.name, "index_b": against.name} if against is not None else None
            writer = PairWriter(
                tmp, idx.images_file, idx.location, head_rows=opts.gallery_size, side_b=side_b, columns=columns
            )
            for chunk in capped(
                without(ranked(job, merged, jf / "merge"), drop),
                max_per_image=opts.max_per_image,
                max_pairs=opts.max_pairs,
            ):
                writer.add(chunk)
            if against is None:
                state.write_rows_streamed(tmp, _id_parts(local), job.digest_parts("a", rows.n))
                with state.AlikeWriter(tmp) as w:
                    for k in merged:
                        for part in _tile_chunks(job, k):
                            w.add(_text(part["id_a"]), _text(part["id_b"]), part["clip"], part["dino"])
            return writer.close(), writer.head

        n_b = rows_b.n if against is not None else None
        counts = {
            "images": rows.n + (n_b or 0),
            **({"images_a": rows.n, "images_b": n_b, "shared_images": across.shared} if across else {}),
            "clip_alike": info["clip_alike"] + extra_counts["clip_alike"] - less_alike,
            "in_box": info["in_box"] + extra_counts["in_box"] - less_box,
        }
        if against is None:
            background = background_sample(rows.n, lambda i, j: (_sims(local.clip, i, j), _sims(local.dino, i, j)))
        else:
            background = background_sample(
                rows.n,
                lambda i, j: (
                    cross_sims(local.clip.take, rows_b.clip.take, *across.kept(i, j)),
                    cross_sims(local.dino.take, rows_b.dino.take, *across.kept(i, j)),
                ),
                across=n_b,
            )
        extra = {
            "ray": {
                "tiles": info["tiles"],
                "tiles_mined": len(wanted),
                "tile_rows": side,
                "shape": shape.kind,
                "quantiser": info["quantiser"],
                "nodes": len(info["nodes"]),
                "tiles_done_before": info["tiles_done_before"],
                "kernels": info["kernels"],
                "pruning": info["prune"],
            }
        }
        if against is not None:
            extra["against"] = against_record(against)
        if g is not None:
            k_new = len(g.new_rows)
            products = k_new * (k_new - 1) // 2 + k_new * g.kept
            extra["incremental"] = g.record(earlier, products)
            reuse = grow.said(earlier, g, products, rows.n)
        written = finish_run(
            run_dir,
            idx,
            opts,
            counts,
            write_pairs,
            scatter_points(job, merged, SCATTER_POINTS),
            background,
            warnings,
            extra,
            pairs=across.pairs if across else None,
            title=f"{idx.name} x {against.name}" if against is not None else None,
        )
    except BaseException:
        job.close()
        raise
    job.remove()
    kernels = ", ".join(f"{k} ({v['tiles']} tiles)" for k, v in info["kernels"].items())
    return MineResult(
        run_dir,
        idx.name if against is None else f"{idx.name} x {against.name}",
        counts["images"],
        counts["clip_alike"],
        counts["in_box"],
        written,
        time.time() - t0,
        warnings,
        job=info,
        kernel=f"products kernels the nodes chose: {kernels}" if kernels else "",
        reuse=reuse,
        shared=across.shared if across else 0,
    )


OLD_PAIRS = -1  # the job's entry for the earlier run's pairs that a band job reuses (a tile file like the others)


def _all_ids(rows) -> np.ndarray:
    """Every row's image id (str objects), read from images.parquet in its row groups."""
    return _text(rows.ids(0, rows.n))


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


def _record_old_pairs(job, earlier, ids: np.ndarray, local, opts, top: int | None) -> dict:
    """The earlier run's CLIP-alike pairs between rows still there, as one more ranked entry of the job (its
    in-box pairs in rank order, cut to `top` as a tile's are, then the rest): the merge and the scatter read it
    as a tile. Returns its counts."""
    from vhmine.mine.grow import old_pairs
    from vhmine.mine.ray.tilejob import box_first, orient_by_id, ranked_dtype

    i, j, c, d = old_pairs(earlier, ids)
    width = local.id_width
    out = np.empty(len(i), ranked_dtype(width))
    orient_by_id(out, i, j, np.asarray(ids[i], dtype=f"S{width}"), np.asarray(ids[j], dtype=f"S{width}"))
    out["clip"], out["dino"], out["gap"], out["lo"], out["hi"] = c, d, c - d, i, j
    box = d <= opts.dino
    rows, kept, others = box_first(out, box, top)
    job.record(OLD_PAIRS, rows, {"kept": kept, "sample": others, "clip_alike": len(out), "in_box": int(box.sum())})
    return {"clip_alike": len(out), "in_box": int(box.sum())}


@dataclass
class MinePlan:
    index: str
    images: int
    dims: tuple[int, int]
    tile: int
    tiles: int
    blocks: int
    pairs: int
    task_bytes: int
    nodes: list[str] = field(default_factory=list)
    slots: int = 1
    device: str = "cpu"
    sample: dict = field(default_factory=dict)

    @property
    def rate(self) -> float:
        """Pairs per second per worker, measured on one tile of the cluster."""
        return self.sample["examined"] / max(self.sample["seconds"], 1e-9)

    @property
    def seconds(self) -> float:
        scan = self.images / (self.sample["scan_rows"] / max(self.sample["scan_seconds"], 1e-9)) / self.slots
        return scan + self.pairs / self.rate / min(self.slots, self.tiles)

    def summary(self) -> str:
        s = self.sample
        return "\n".join(
            [
                (
                    f"plan for index {self.index!r}: {self.images:,} images, CLIP {self.dims[0]}-d + DINOv2"
                    f" {self.dims[1]}-d"
                ),
                (
                    f"tiles: {self.tiles:,} ({self.blocks:,} row blocks of {self.tile:,} rows, upper triangle), "
                    f"{self.pairs:,} pairs to look at"
                ),
                (
                    f"memory per tile task: {self.task_bytes / 2**20:,.0f} MiB (+ 24 bytes per candidate); the driver "
                    "holds bookkeeping per tile, never the vectors"
                ),
                f"cluster: {len(self.nodes)} node(s) read the index; {self.slots} tile(s) at once on {self.device}",
                (
                    f"measured: a {s['rows_a']:,} x {s['rows_b']:,} tile in {s['seconds']:.2f} s on one worker: "
                    f"{self.rate:,.3g} pairs/s per worker"
                ),
                *([f"that worker's {s['kernel_line']}"] if s.get("kernel_line") else []),
                (
                    f"estimated: {_duration(self.seconds)} for the scan and all tiles at {self.slots} worker(s) "
                    f"({_duration(self.pairs / self.rate)} of one worker's time)"
                ),
            ]
        )


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


def plan_ray(idx, opts) -> MinePlan:
    """Size the job: tiles, memory per task, and an estimate from one tile mined and timed on the cluster."""
    from vhmine.mine.ray import tiletask
    from vhmine.mine.ray.engine import connect, import_ray, probe_nodes, slots, tile_bytes
    from vhmine.mine.ray.tilejob import Triangle

    ray = import_ray()
    device = _device(opts)
    rows, _ = _rows(idx, opts, ids=False)
    side = _side(opts, rows)
    tri = Triangle(rows.n, side)
    plan = MinePlan(
        idx.name,
        rows.n,
        (rows.clip.dim, rows.dino.dim),
        side,
        len(tri),
        tri.blocks,
        rows.n * (rows.n - 1) // 2,
        tile_bytes(side, rows.clip.dim, rows.dino.dim),
        device=device,
    )
    started = connect(ray, opts.ray_address)
    try:
        plan.nodes = probe_nodes(ray, rows)
        plan.slots = slots(ray, device)
        r, c = tri.tile_at(1 if len(tri) > 1 else 0)  # an off-diagonal tile where there is one: a full one
        task = ray.remote(tiletask.sample_tile).options(
            num_cpus=1, num_gpus=1 if device == "cuda" else 0, memory=plan.task_bytes
        )
        plan.sample = ray.get(task.remote(rows, r, c, side, opts.clip, device, opts.kernel))
        plan.sample.update(rows_a=min(side, rows.n - r), rows_b=min(side, rows.n - c))
    finally:
        if started:
            ray.shutdown()
    if not math.isfinite(plan.rate) or plan.rate <= 0:
        raise InputError("the sample tile took no measurable time; the index is too small to plan a job for")
    return plan
