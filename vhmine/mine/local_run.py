"""The local engine's run: the exact join (mine.join) in this process, over an index loaded whole, into the
run folder (runfolder.finish_run): the triangle of one index, only the new rows' band of a grown index when
an earlier run of the same command can be reused (mine.grow), or the rectangle of two (`--against`). A small
index (SMALL_PAIRS) is joined by multiplying every pair in numpy float64, without loading torch (small_join).

Reads the opened index(es) and, for a grown index, the earlier run's rows.parquet and alike.parquet; writes
the run folder: pairs.parquet / pairs.csv (mine.write), rows.parquet and alike.parquet (mine.state; not for
--against runs), run.json, the scatter and the gallery. The Ray run (mine.ray_run) is its sibling: neither
imports the other; mine.job chooses.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path

from vhmine.mine.runfolder import BACKGROUND_PAIRS, MineResult, background_sample, finish_run, rank_pairs, rerun_command

log = logging.getLogger("vhmine.mine.job")

# A run with at most this many pairs (512 rows) multiplies every one of them in numpy float64 (small_join):
# 0.1-0.5 s here, where importing torch for the fast pass takes 2-5 s.
SMALL_PAIRS = 1 << 17


def mine_local(idx, name: str, opts, run_dir: Path, default_dir: Path, warnings: list[str], t0: float) -> MineResult:
    """The run folder of `idx` (an index loaded whole): a full mine, or only the new rows' pairs of a grown
    index merged with an earlier run's."""
    import numpy as np

    from vhmine.mine import state
    from vhmine.mine.grow import grown_pairs, said
    from vhmine.mine.join import find_pairs, pair_sims, row_digests
    from vhmine.mine.write import pairs_frame, side, write_table

    n = len(idx.images)
    images = idx.images
    ids = images["image_id"].to_numpy().astype(object)
    digests = row_digests(idx.clip, idx.dino, workers=2)  # what a later run of the grown index checks (mine.grow)
    earlier, g = _earlier(run_dir, default_dir, idx, opts, ids, digests)
    # One search at the CLIP threshold gives every CLIP-alike pair with its DINOv2 sim: the pairs in
    # the box, and the rest of the candidates for the scatter plot.
    st: dict = {}
    find = dict(device=opts.device, progress=opts.progress, kernel=opts.kernel, stats=st, prune=opts.prune)
    if earlier is not None:
        found = grown_pairs(earlier, g, idx.clip, idx.dino, ids, opts.clip, **find)
        products = int(st.get("pairs_examined", 0))
        incremental = g.record(earlier, products)
        reuse = said(earlier, g, products, n)
    else:
        found = small_join(idx.clip, idx.dino, opts, st)
        if found is None:
            found = find_pairs(idx.clip, idx.dino, opts.clip, math.inf, **find)
        incremental, reuse = None, ""
    in_box = found.dino_sim <= opts.dino
    i, j = found.i[in_box], found.j[in_box]
    clip_sim, dino_sim = found.clip_sim[in_box], found.dino_sim[in_box]
    # Orient each pair by image id so a pair's identity does not depend on row order.
    swap = ids[i] > ids[j]
    a = np.where(swap, j, i)
    b = np.where(swap, i, j)
    gap, cuts = clip_sim - dino_sim, {}
    order = rank_pairs(ids[a], ids[b], gap, max_per_image=opts.max_per_image, max_pairs=opts.max_pairs, cuts=cuts)
    a, b, clip_sim, dino_sim, gap = a[order], b[order], clip_sim[order], dino_sim[order], gap[order]
    pairs = pairs_frame(1, side(images, a, idx.location), side(images, b, idx.location), clip_sim, dino_sim, gap)

    def write_pairs(tmp: Path):
        write_table(tmp, pairs)
        lo, hi = ids[found.i], ids[found.j]
        state.write_state(
            tmp, ids, digests, np.where(lo < hi, lo, hi), np.where(lo < hi, hi, lo), found.clip_sim, found.dino_sim
        )
        return len(pairs), pairs.head(opts.gallery_size)

    counts = {"images": n, "clip_alike": int(len(found)), "in_box": int(in_box.sum())}
    background = background_sample(
        n, lambda i, j: (pair_sims(idx.clip, i, j), pair_sims(idx.dino, i, j)), size=BACKGROUND_PAIRS
    )
    relax = None
    if not len(order):  # say what to relax, from what this run holds (mine.relax)
        from vhmine.mine.relax import nearby

        relax = nearby(
            found,
            background,
            n,
            opts.clip,
            opts.dino,
            all_pairs=n * (n - 1) // 2 <= BACKGROUND_PAIRS,
            base_command=rerun_command(name, opts),
        )
    extra = {
        "products_kernel": st.get("kernel"),
        "pruning": st.get("prune"),
        **({"nearby": relax.record()} if relax else {}),
        **({"incremental": incremental} if incremental else {}),
    }
    written = finish_run(
        run_dir, idx, opts, counts, write_pairs, (found.clip_sim, found.dino_sim), background, warnings, extra=extra
    )
    return MineResult(
        run_dir,
        name,
        n,
        counts["clip_alike"],
        counts["in_box"],
        written,
        time.time() - t0,
        warnings,
        relax=relax.lines if relax else [],
        kernel=st.get("kernel_line", ""),
        reuse=reuse,
        cuts=cuts,
    )


def small_join(clip, dino, opts, stats: dict):
    """Every CLIP-alike pair of a small index (at most SMALL_PAIRS pairs, on the CPU, no --kernel named), all
    of them multiplied in numpy float64 (mine.join.brute_force_pairs, the join's own definition: the pairs and
    their similarities are find_pairs', bit for bit) without loading torch, whose import alone takes longer
    than such a join; None for any other run. Refuses what find_pairs refuses (check_rows, check_limits)."""
    from vhmine.mine.join import brute_force_pairs
    from vhmine.mine.join.rowcheck import check_limits
    from vhmine.mine.join.simsearch import check_rows

    n = len(clip)
    pairs = n * (n - 1) // 2
    if pairs > SMALL_PAIRS or opts.kernel not in (None, "auto") or str(opts.device or "cpu") != "cpu":
        return None
    clip_min, _ = check_limits(opts.clip, math.inf)
    clip, dino = check_rows(clip, dino)
    line = f"products: every one of the {pairs:,} pairs in float64 (a run of at most {SMALL_PAIRS:,} pairs; no torch)"
    stats.update(
        pairs_examined=pairs,
        kernel={"name": "float64", "chosen": f"small run: at most {SMALL_PAIRS} pairs"},
        kernel_line=line,
    )
    from tqdm import tqdm

    with tqdm(total=1, desc="mining pairs", unit="block", disable=not opts.progress) as bar:
        found = brute_force_pairs(clip, dino, clip_min)
        bar.update(1)
    return found


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


def mine_across(a, b, opts, run_dir: Path, warnings: list[str], t0: float) -> MineResult:
    """The run folder of A x B (two indexes loaded whole, mine.across.open_pair)."""
    from vhmine.mine.join import PairSet, find_pairs_across
    from vhmine.mine.join.shared import keep_across, shared_ids
    from vhmine.mine.runfolder import against_record, cross_sims
    from vhmine.mine.write import pairs_frame, side, write_table

    na, nb = len(a.images), len(b.images)
    st: dict = {}
    found = find_pairs_across(
        a.clip,
        a.dino,
        b.clip,
        b.dino,
        opts.clip,
        math.inf,
        device=opts.device,
        progress=opts.progress,
        kernel=opts.kernel,
        stats=st,
    )
    ids_a, ids_b = a.images["image_id"].to_numpy().astype(object), b.images["image_id"].to_numpy().astype(object)
    shared = len(shared_ids(ids_a, ids_b))
    if shared:  # no pair of an image with itself, each unordered pair once (mine.join.shared)
        kept = keep_across(ids_a[found.i], ids_b[found.j], prefer=found.dino_sim <= opts.dino)
        found = PairSet(found.i[kept], found.j[kept], found.clip_sim[kept], found.dino_sim[kept])
    in_box = found.dino_sim <= opts.dino
    i, j = found.i[in_box], found.j[in_box]
    clip_sim, dino_sim = found.clip_sim[in_box], found.dino_sim[in_box]
    gap, cuts = clip_sim - dino_sim, {}
    order = rank_pairs(ids_a[i], ids_b[j], gap, max_per_image=opts.max_per_image, max_pairs=opts.max_pairs, cuts=cuts)
    i, j, clip_sim, dino_sim, gap = i[order], j[order], clip_sim[order], dino_sim[order], gap[order]
    pairs = pairs_frame(1, side(a.images, i, a.location), side(b.images, j, b.location), clip_sim, dino_sim, gap)
    pairs["index_a"], pairs["index_b"] = a.name, b.name

    def write_pairs(tmp: Path):
        write_table(tmp, pairs)
        return len(pairs), pairs.head(opts.gallery_size)

    counts = {
        "images": na + nb,
        "images_a": na,
        "images_b": nb,
        "shared_images": shared,
        "clip_alike": int(len(found)),
        "in_box": int(in_box.sum()),
    }

    def sims(x, y):
        if shared:  # the rectangle's pairs as the run counts them
            kept = keep_across(ids_a[x], ids_b[y])
            x, y = x[kept], y[kept]
        return (
            cross_sims(a.clip.__getitem__, b.clip.__getitem__, x, y),
            cross_sims(a.dino.__getitem__, b.dino.__getitem__, x, y),
        )

    background = background_sample(na, sims, size=BACKGROUND_PAIRS, across=nb)
    pairs_there = na * nb - shared - shared * (shared - 1) // 2  # of two different images, each once
    relax = None
    if not len(order):
        from vhmine.mine.relax import nearby

        relax = nearby(
            found,
            background,
            na + nb,
            opts.clip,
            opts.dino,
            all_pairs=na * nb <= BACKGROUND_PAIRS,
            base_command=rerun_command(a.name, opts),
            pairs=pairs_there,
        )
    extra = {
        "against": against_record(b),
        "products_kernel": st.get("kernel"),
        "pruning": st.get("prune"),
        **({"nearby": relax.record()} if relax else {}),
    }
    written = finish_run(
        run_dir,
        a,
        opts,
        counts,
        write_pairs,
        (found.clip_sim, found.dino_sim),
        background,
        warnings,
        extra=extra,
        pairs=pairs_there,
        title=f"{a.name} x {b.name}",
    )
    return MineResult(
        run_dir,
        f"{a.name} x {b.name}",
        na + nb,
        counts["clip_alike"],
        counts["in_box"],
        written,
        time.time() - t0,
        warnings,
        relax=relax.lines if relax else [],
        kernel=st.get("kernel_line", ""),
        shared=shared,
        cuts=cuts,
    )
