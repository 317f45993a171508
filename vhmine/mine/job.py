"""Stage 2, mine: an index -> `runs/<run>/` with the pairs that CLIP calls alike and DINOv2 does not.

Reads `indexes/<name>/` (vhmine.index); this module holds the options and chooses the engine: the
exact join in this process (--engine local: mine.local_run, over mine.join), or its tiles on a Ray
cluster (--engine ray: mine.ray_run, over mine.ray, which reads the index by row range and never loads
it); the two are siblings and neither imports the other. The pair set equals a float64 brute force, both thresholds
inclusive, on either engine. Writes, all at once by renaming a finished temporary folder into place (finish_run):

    pairs.parquet / pairs.csv  rank, image ids, sha256s, absolute paths, clip_sim, dino_sim, gap,
                               COCO ids and categories of both images; ranked by gap (mine.write:
                               past 1,000,000 pairs pairs.parquet is a folder of shards, same columns)
    run.json                   thresholds, encoders, index, counts, options, file checksums
                               (and, for Ray, the job: tiles, tile side, quantisation, workers)
    scatter.png, gallery.html  the candidate pairs against the threshold box; the top pairs

While it runs, a mine holds `runs/.<run>.lock` (mine.runlock): a second mine into the same folder says that
one is writing it. A Ray job also keeps `runs/.<run>.job/` (mine.ray.tilejob) until the run folder is
written: rerun the same command after a stop and it resumes.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

from vhmine.config import DEFAULT_CLIP_MIN, DEFAULT_DINO_MAX, indexes_root, runs_root
from vhmine.errors import InputError
from vhmine.files import check_owned, check_writable
from vhmine.index import default_index_name, open_index
from vhmine.mine.runfolder import usable_index

log = logging.getLogger(__name__)


@dataclass
class MineOptions:
    index: str | None = None
    clip: float = DEFAULT_CLIP_MIN
    dino: float = DEFAULT_DINO_MAX
    max_pairs: int | None = None
    max_per_image: int | None = None
    out: Path | None = None
    indexes: Path | None = None
    device: str | None = None
    engine: str = "local"  # "local": mine.local_run (mine.join here); "ray": mine.ray_run (mine.ray on a cluster)
    ray_address: str | None = None
    tile_memory: int | None = None  # bytes per Ray tile [default: mine.ray.engine.DEFAULT_TILE_MEMORY]
    index_url: str | None = None  # where Ray workers read the index (fsspec URL or shared path) [default: its folder]
    plan: bool = False  # Ray: size the job (tiles, memory, a measured rate, estimated time) instead of mining
    tiles: list[int] | None = None  # Ray: mine only these tile numbers (sizing runs and benchmarks)
    gallery_size: int = 100
    progress: bool = True
    kernel: str | None = (
        None  # the products kernel (mine.join.kernels.KERNELS) [default: the fastest measured here / per node]
    )
    full: bool = False  # mine every pair even when an earlier run of the same command could be reused (mine.grow)
    prune: bool | None = None  # skip products that provably hold no pair (mine.join.prune) [None: when it pays]
    against: str | None = None  # a second index (name under --indexes, or folder): pairs with one image from each


def check_thresholds(clip: float, dino: float) -> list[str]:
    """Raise on impossible thresholds; return warnings for suspicious ones."""
    for flag, v in (("--clip", clip), ("--dino", dino)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and -1.0 <= v <= 1.0):
            raise InputError(f"{flag} {v}: a cosine similarity threshold must lie in [-1, 1]")
    warnings = []
    if dino >= clip:
        warnings.append(
            f"--dino {dino} >= --clip {clip}: pairs are meant to be ones CLIP finds MORE alike than DINOv2 "
            "(e.g. --clip 0.9 --dino 0.55); many of these pairs will be plain near-duplicates"
        )
    return warnings


def default_run_name(index: str, clip: float, dino: float, against: str | None = None) -> str:
    return f"{index}{f'-x-{Path(against).name}' if against else ''}-clip{clip:g}-dino{dino:g}"


def mine_index(opts: MineOptions):
    """Mine the index into the run folder (a MineResult); with opts.plan (Ray only), size the job instead
    and return its MinePlan without mining. Ctrl-C becomes an Interrupted that says what was kept."""
    try:
        return _mine(opts)
    except KeyboardInterrupt:
        from vhmine.errors import Interrupted

        if opts.engine == "ray":  # finished tiles are files in the job folder: the same command resumes from them
            raise Interrupted(
                "interrupted: the tiles finished so far are kept in the run's job folder; run the same "
                "command to resume"
            ) from None
        # a run folder is published whole at the end: an interrupted one leaves nothing
        raise Interrupted(
            "interrupted: no run written (mine publishes its run folder whole, at the end; an earlier "
            "run there is as it was); run the same command to mine again"
        ) from None


def _mine(opts: MineOptions):
    t0 = time.time()
    if opts.engine not in ("local", "ray"):
        raise InputError(f"--engine {opts.engine}: not an engine; use local or ray")
    if opts.plan and opts.engine != "ray":
        raise InputError("--plan sizes a Ray job: add --engine ray")
    if opts.index_url and opts.engine != "ray":
        raise InputError("--index-url tells Ray workers where the index is: add --engine ray")
    if opts.kernel not in (None, "auto"):
        from vhmine.mine.join.kernels import levels_of

        levels_of(opts.kernel, 8)  # a name that is no kernel is said before anything is read
    warnings = check_thresholds(opts.clip, opts.dino)  # kept in run.json
    for w in warnings:  # said once, before the search (not after it, in the summary)
        log.warning("%s", w)
    root = indexes_root(opts.indexes)
    name = default_index_name(root, opts.index)
    default_dir = runs_root() / default_run_name(name, opts.clip, opts.dino, opts.against)
    run_dir = Path(opts.out) if opts.out else default_dir
    if not opts.plan:
        check_writable(
            run_dir.parent, flag="--out"
        )  # its files go beside it first: said in one line, before the search
    if opts.against and opts.plan:
        raise InputError("--plan sizes a triangle job; it does not size an --against one yet: leave out --plan")
    if opts.plan:
        return _run(opts, root, name, run_dir, default_dir, warnings, t0)
    from vhmine.mine.runlock import run_lock

    with run_lock(run_dir):  # one mine a run folder at a time (a second says so, in one line)
        return _run(opts, root, name, run_dir, default_dir, warnings, t0)


def _run(opts: MineOptions, root: Path, name: str, run_dir: Path, default_dir: Path, warnings: list[str], t0: float):
    if opts.engine == "ray":  # the driver never loads the vectors or the image table
        from vhmine.mine.ray_run import mine_ray, plan_ray

        if opts.against:
            from vhmine.mine.across import open_pair

            check_owned(run_dir, "vhmine mine")
            a, b = open_pair(root, name, opts, load=False)
            return mine_ray(a, opts, run_dir, warnings, t0, against=b)
        idx = usable_index(open_index(root, name, load_vectors=False, load_images=False))
        if opts.plan:
            return plan_ray(idx, opts)
        check_owned(run_dir, "vhmine mine")
        return mine_ray(idx, opts, run_dir, warnings, t0, default_dir=default_dir)
    from vhmine.mine.local_run import mine_across, mine_local

    if opts.against:
        from vhmine.mine.across import open_pair

        check_owned(run_dir, "vhmine mine")
        a, b = open_pair(root, name, opts)
        return mine_across(a, b, opts, run_dir, warnings, t0)
    check_owned(run_dir, "vhmine mine")  # a run replaces its folder as a whole: only an earlier run
    return mine_local(usable_index(open_index(root, name)), name, opts, run_dir, default_dir, warnings, t0)
