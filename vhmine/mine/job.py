"""Stage 2, mine: an index -> `runs/<run>/` with the pairs that CLIP calls alike and DINOv2 does not.

Reads `indexes/<name>/` (index.py); the exact search itself is simsearch.find_pairs here (--engine
local), or its tiles on a Ray cluster (--engine ray: mine.ray_run, which reads the index by row range
and never loads it). The pair set equals a float64 brute force, both thresholds inclusive, on either
engine. Writes, all at once by renaming a finished temporary folder into place (finish_run):

    pairs.parquet / pairs.csv  rank, image ids, sha256s, absolute paths, clip_sim, dino_sim, gap,
                               COCO ids and categories of both images; ranked by gap (mine.write:
                               past 1,000,000 pairs pairs.parquet is a folder of shards, same columns)
    run.json                   thresholds, encoders, index, counts, options, file checksums
                               (and, for Ray, the job: tiles, tile side, quantisation, workers)
    scatter.png, gallery.html  the candidate pairs against the threshold box; the top pairs

A Ray job also keeps `runs/.<run>.job/` (mine.tilejob) until the run folder is written: rerun the same
command after a stop and it resumes.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

from vhmine.config import DEFAULT_CLIP_MIN, DEFAULT_DINO_MAX, default_index_name, indexes_root, runs_root
from vhmine.errors import InputError
from vhmine.files import check_owned, check_writable
from vhmine.embed.index import open_index
from vhmine.mine.runfolder import (
    BACKGROUND_PAIRS, MineResult, background_sample, finish_run, rank_pairs, rerun_command, usable_index,
)

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
    engine: str = "local"  # "local": simsearch.find_pairs here; "ray": ray_engine.find_pairs_ray on a cluster
    ray_address: str | None = None
    tile_memory: int | None = None  # bytes per Ray tile [default: ray_engine.DEFAULT_TILE_MEMORY]
    index_url: str | None = None  # where Ray workers read the index (fsspec URL or shared path) [default: its folder]
    plan: bool = False  # Ray: size the job (tiles, memory, a measured rate, estimated time) instead of mining
    tiles: list[int] | None = None  # Ray: mine only these tile numbers (sizing runs and benchmarks)
    gallery_size: int = 100
    progress: bool = True
    kernel: str | None = None  # the products kernel (mine.kernels.KERNELS) [default: the fastest measured here / per node]
    full: bool = False  # mine every pair even when an earlier run of the same command could be reused (mine.grow)
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
            raise Interrupted("interrupted: the tiles finished so far are kept in the run's job folder; run the same "
                              "command to resume") from None
        # a run folder is published whole at the end: an interrupted one leaves nothing
        raise Interrupted("interrupted: no run written (mine publishes its run folder whole, at the end; an earlier "
                          "run there is as it was); run the same command to mine again") from None


def _mine(opts: MineOptions):
    import numpy as np

    from vhmine.mine import state
    from vhmine.mine.grow import grown_pairs, said
    from vhmine.mine.simsearch import find_pairs, pair_sims
    from vhmine.mine.state import row_digests
    from vhmine.mine.write import pairs_frame, side, write_table

    t0 = time.time()
    if opts.engine not in ("local", "ray"):
        raise InputError(f"--engine {opts.engine}: not an engine; use local or ray")
    if opts.plan and opts.engine != "ray":
        raise InputError("--plan sizes a Ray job: add --engine ray")
    if opts.index_url and opts.engine != "ray":
        raise InputError("--index-url tells Ray workers where the index is: add --engine ray")
    if opts.kernel not in (None, "auto"):
        from vhmine.mine.kernels import levels_of

        levels_of(opts.kernel, 8)  # a name that is no kernel is said before anything is read
    warnings = check_thresholds(opts.clip, opts.dino)  # kept in run.json
    for w in warnings:  # said once, before the search (not after it, in the summary)
        log.warning("%s", w)
    root = indexes_root(opts.indexes)
    name = default_index_name(root, opts.index)
    default_dir = runs_root() / default_run_name(name, opts.clip, opts.dino, opts.against)
    run_dir = Path(opts.out) if opts.out else default_dir
    if not opts.plan:
        check_writable(run_dir.parent, flag="--out")  # its files go beside it first: said in one line, before the search
    if opts.against:
        from vhmine.mine.across import mine_across

        if opts.plan:
            raise InputError("--plan sizes a triangle job; it does not size an --against one yet: leave out --plan")
        check_owned(run_dir, "vhmine mine")
        return mine_across(root, name, opts, run_dir, warnings, t0)
    if opts.engine == "ray":  # the driver never loads the vectors or the image table
        from vhmine.mine.ray_run import mine_ray, plan_ray

        idx = usable_index(open_index(root, name, load_vectors=False, load_images=False))
        if opts.plan:
            return plan_ray(idx, opts)
        check_owned(run_dir, "vhmine mine")
        return mine_ray(idx, opts, run_dir, warnings, t0, default_dir=default_dir)
    check_owned(run_dir, "vhmine mine")  # a run replaces its folder as a whole: only an earlier run
    idx = usable_index(open_index(root, name))
    n = len(idx.images)
    images = idx.images
    ids = images["image_id"].to_numpy().astype(object)
    digests = row_digests(idx.clip, idx.dino, workers=2)  # what a later run of the grown index checks (mine.grow)
    earlier, g = _earlier(run_dir, default_dir, idx, opts, ids, digests)
    # One search at the CLIP threshold gives every CLIP-alike pair with its DINOv2 sim: the pairs in
    # the box, and the rest of the candidates for the scatter plot.
    st: dict = {}
    find = dict(device=opts.device, progress=opts.progress, kernel=opts.kernel, stats=st)
    if earlier is not None:
        found = grown_pairs(earlier, g, idx.clip, idx.dino, ids, opts.clip, **find)
        products = int(st.get("pairs_examined", 0))
        incremental = g.record(earlier, products)
        reuse = said(earlier, g, products, n)
    else:
        found = find_pairs(idx.clip, idx.dino, opts.clip, math.inf, **find)
        incremental, reuse = None, ""
    in_box = found.dino_sim <= opts.dino
    i, j = found.i[in_box], found.j[in_box]
    clip_sim, dino_sim = found.clip_sim[in_box], found.dino_sim[in_box]
    # Orient each pair by image id so a pair's identity does not depend on row order.
    swap = ids[i] > ids[j]
    a = np.where(swap, j, i)
    b = np.where(swap, i, j)
    gap = clip_sim - dino_sim
    order = rank_pairs(ids[a], ids[b], gap, max_per_image=opts.max_per_image, max_pairs=opts.max_pairs)
    a, b, clip_sim, dino_sim, gap = a[order], b[order], clip_sim[order], dino_sim[order], gap[order]
    pairs = pairs_frame(1, side(images, a, idx.location), side(images, b, idx.location), clip_sim, dino_sim, gap)

    def write_pairs(tmp: Path):
        write_table(tmp, pairs)
        lo, hi = ids[found.i], ids[found.j]
        state.write_state(tmp, ids, digests, np.where(lo < hi, lo, hi), np.where(lo < hi, hi, lo), found.clip_sim,
                          found.dino_sim)
        return len(pairs), pairs.head(opts.gallery_size)

    counts = {"images": n, "clip_alike": int(len(found)), "in_box": int(in_box.sum())}
    background = background_sample(n, lambda i, j: (pair_sims(idx.clip, i, j), pair_sims(idx.dino, i, j)),
                                   size=BACKGROUND_PAIRS)
    relax = None
    if not len(order):  # say what to relax, from what this run holds (mine.relax)
        from vhmine.mine.relax import nearby

        relax = nearby(found, background, n, opts.clip, opts.dino, all_pairs=n * (n - 1) // 2 <= BACKGROUND_PAIRS,
                       base_command=rerun_command(name, opts))
    extra = {"products_kernel": st.get("kernel"), **({"nearby": relax.record()} if relax else {}),
             **({"incremental": incremental} if incremental else {})}
    written = finish_run(run_dir, idx, opts, counts, write_pairs, (found.clip_sim, found.dino_sim), background,
                         warnings, extra=extra)
    return MineResult(run_dir, name, n, counts["clip_alike"], counts["in_box"], written, time.time() - t0, warnings,
                      relax=relax.lines if relax else [], kernel=st.get("kernel_line", ""), reuse=reuse)


def _earlier(run_dir: Path, default_dir: Path, idx, opts, ids, digests):
    """(the earlier run to reuse, how the index grew since), or (None, None): no earlier run, --full, or one
    that cannot be reused (why is said in one line)."""
    from vhmine.mine.grow import changed_line, earlier_run, growth, reusable

    folder = None if opts.full else earlier_run(run_dir, default_dir)
    if folder is None:
        return None, None
    earlier, why = reusable(folder, idx, opts)
    g = growth(earlier, ids, digests) if earlier is not None else None
    if g is not None and g.changed:
        earlier, g, why = None, None, changed_line(g, idx, folder)
    if why:
        log.warning("%s", why)
    return earlier, g
