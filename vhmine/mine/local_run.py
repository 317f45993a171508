"""The local engine (LocalEngine, mine.engine's interface): the exact join (mine.join) in this process, over
indexes loaded whole: the triangle of one index, only the new rows' band of a grown index when the plan holds
an earlier run of the same command (mine.grow), or the rectangle of two (`--against`). A small index
(SMALL_PAIRS) is joined by multiplying every pair in numpy float64, without loading torch (small_join).

Reads the plan's opened index(es) and, for a band, the earlier run's alike.parquet (mine.grow); writes only
into the temporary folder the publish step hands to Mined.write_pairs: pairs.parquet / pairs.csv
(mine.write) and, for one index, rows.parquet and alike.parquet (mine.state). The Ray engine (mine.ray_run)
is its sibling: neither imports the other; mine.run chooses.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from vhmine.mine.engine import Mined

log = logging.getLogger("vhmine.mine.job")

# A run with at most this many pairs (512 rows) multiplies every one of them in numpy float64 (small_join):
# 0.1-0.5 s here, where importing torch for the fast pass takes 2-5 s.
SMALL_PAIRS = 1 << 17


class LocalEngine:
    """The exact join in this process (mine.join), over the plan's indexes loaded whole."""

    name = "local"

    def mine(self, plan) -> Mined:
        """The plan's pairs (mine.plan.RunPlan), ranked and capped (mine.rank)."""
        if plan.b is not None:
            return mine_across(plan)
        return mine_one(plan)


def mine_one(plan) -> Mined:
    """The triangle of one index, or only the band of a grown index's new rows merged with the earlier run's
    pairs (the union is the triangle's PairSet, exactly)."""
    import numpy as np

    from vhmine.mine import state
    from vhmine.mine.background import BACKGROUND_PAIRS, background_sample
    from vhmine.mine.grow import changed_line, grown_pairs, growth, said
    from vhmine.mine.join import find_pairs, pair_sims, row_digests
    from vhmine.mine.rank import ranked
    from vhmine.mine.write import pairs_frame, side, write_table

    idx, opts, earlier = plan.a, plan.ctx.opts, plan.earlier
    n, images = len(plan.a.images), plan.a.images
    ids = images["image_id"].to_numpy().astype(object)
    digests = row_digests(idx.clip, idx.dino, workers=2)  # what a later run of the grown index checks (mine.grow)
    g = growth(earlier, ids, digests) if earlier is not None else None
    if g is not None and g.changed:
        log.warning("%s", changed_line(g, idx, earlier.folder))
        earlier = g = None
    # One search at the CLIP threshold gives every CLIP-alike pair with its DINOv2 sim: the pairs in
    # the box, and the rest of the candidates for the scatter plot.
    st: dict = {}
    find = dict(device=opts.device, progress=opts.progress, kernel=opts.kernel, stats=st, prune=opts.prune)
    incremental, reuse = None, ""
    if earlier is not None:
        found = grown_pairs(earlier, g, idx.clip, idx.dino, ids, opts.clip, **find)
        products = int(st.get("pairs_examined", 0))
        incremental, reuse = g.record(earlier, products), said(earlier, g, products, n)
    else:
        found = small_join(idx.clip, idx.dino, opts, st)
        if found is None:
            found = find_pairs(idx.clip, idx.dino, opts.clip, math.inf, **find)
    r = ranked(found, ids, ids, opts)
    sides = side(images, r.a, idx.location), side(images, r.b, idx.location)
    pairs = pairs_frame(1, *sides, r.clip_sim, r.dino_sim, r.gap)

    def write_pairs(tmp: Path):
        write_table(tmp, pairs)
        lo, hi = ids[found.i], ids[found.j]
        state.write_state(
            tmp, ids, digests, np.where(lo < hi, lo, hi), np.where(lo < hi, hi, lo), found.clip_sim, found.dino_sim
        )
        return len(pairs), pairs.head(opts.gallery_size)

    background = background_sample(
        n, lambda i, j: (pair_sims(idx.clip, i, j), pair_sims(idx.dino, i, j)), size=BACKGROUND_PAIRS
    )
    mined = Mined(
        idx.name,
        {"images": n, "clip_alike": int(len(found)), "in_box": r.in_box},
        write_pairs,
        (found.clip_sim, found.dino_sim),
        background,
        kernel=st.get("kernel_line", ""),
        reuse=reuse,
        cuts=r.cuts,
    )
    nearby = _relax(mined, plan, found, len(pairs), all_pairs=n * (n - 1) // 2 <= BACKGROUND_PAIRS)
    mined.extra = {
        "products_kernel": st.get("kernel"),
        "pruning": st.get("prune"),
        **nearby,
        **({"incremental": incremental} if incremental else {}),
    }
    return mined


def _relax(mined: Mined, plan, found, written: int, *, all_pairs: bool, pairs: int | None = None) -> dict:
    """With no pair written: what to relax (mine.relax, from what the run holds) into mined.relax, and
    run.json's `nearby`; else nothing."""
    if written:
        return {}
    from vhmine.mine.plan import rerun_command
    from vhmine.mine.relax import nearby

    opts = plan.ctx.opts
    relax = nearby(
        found,
        mined.background,
        mined.counts["images"],
        opts.clip,
        opts.dino,
        all_pairs=all_pairs,
        base_command=rerun_command(plan.a.name, opts),
        pairs=pairs,
    )
    mined.relax = relax.lines
    return {"nearby": relax.record()}


def small_join(clip, dino, opts, stats: dict):
    """Every CLIP-alike pair of a small index (at most SMALL_PAIRS pairs, on the CPU, no --kernel named), all
    of them multiplied in numpy float64 (mine.join.brute_force_pairs, the join's own definition: the pairs and
    their similarities are find_pairs', bit for bit) without loading torch, whose import alone takes longer
    than such a join; None for any other run. Refuses what find_pairs refuses (check_rows, check_limits)."""
    from vhmine.mine.join import small_pairs

    n = len(clip)
    pairs = n * (n - 1) // 2
    if pairs > SMALL_PAIRS or opts.kernel not in (None, "auto") or str(opts.device or "cpu") != "cpu":
        return None
    line = f"products: every one of the {pairs:,} pairs in float64 (a run of at most {SMALL_PAIRS:,} pairs; no torch)"
    stats.update(
        pairs_examined=pairs,
        kernel={"name": "float64", "chosen": f"small run: at most {SMALL_PAIRS} pairs"},
        kernel_line=line,
    )
    return small_pairs(clip, dino, opts.clip, progress=opts.progress)


def mine_across(plan) -> Mined:
    """The rectangle A x B (two indexes loaded whole): side a always from A."""
    from vhmine.mine.background import BACKGROUND_PAIRS, background_sample, cross_sims
    from vhmine.mine.join import PairSet, find_pairs_across, keep_across, shared_ids
    from vhmine.mine.rank import ranked
    from vhmine.mine.write import pairs_frame, side, write_table

    a, b, opts = plan.a, plan.b, plan.ctx.opts
    na, nb = len(a.images), len(b.images)
    st: dict = {}
    find = dict(device=opts.device, progress=opts.progress, kernel=opts.kernel, stats=st)
    found = find_pairs_across(a.clip, a.dino, b.clip, b.dino, opts.clip, math.inf, **find)
    ids_a, ids_b = a.images["image_id"].to_numpy().astype(object), b.images["image_id"].to_numpy().astype(object)
    shared = len(shared_ids(ids_a, ids_b))
    if shared:  # no pair of an image with itself, each unordered pair once (mine.join.keep_across)
        kept = keep_across(ids_a[found.i], ids_b[found.j], prefer=found.dino_sim <= opts.dino)
        found = PairSet(found.i[kept], found.j[kept], found.clip_sim[kept], found.dino_sim[kept])
    r = ranked(found, ids_a, ids_b, opts, orient=False)
    sides = side(a.images, r.a, a.location), side(b.images, r.b, b.location)
    pairs = pairs_frame(1, *sides, r.clip_sim, r.dino_sim, r.gap)
    pairs["index_a"], pairs["index_b"] = a.name, b.name

    def write_pairs(tmp: Path):
        write_table(tmp, pairs)
        return len(pairs), pairs.head(opts.gallery_size)

    def sims(x, y):
        if shared:  # the rectangle's pairs as the run counts them
            kept = keep_across(ids_a[x], ids_b[y])
            x, y = x[kept], y[kept]
        return (
            cross_sims(a.clip.__getitem__, b.clip.__getitem__, x, y),
            cross_sims(a.dino.__getitem__, b.dino.__getitem__, x, y),
        )

    counts = {"images": na + nb, "images_a": na, "images_b": nb, "shared_images": shared}
    counts.update(clip_alike=int(len(found)), in_box=r.in_box)
    pairs_there = na * nb - shared - shared * (shared - 1) // 2  # of two different images, each once
    title = f"{a.name} x {b.name}"
    background = background_sample(na, sims, size=BACKGROUND_PAIRS, across=nb)
    mined = Mined(title, counts, write_pairs, (found.clip_sim, found.dino_sim), background, pairs=pairs_there)
    mined.title, mined.kernel, mined.shared, mined.cuts = title, st.get("kernel_line", ""), shared, r.cuts
    nearby = _relax(mined, plan, found, len(pairs), all_pairs=na * nb <= BACKGROUND_PAIRS, pairs=pairs_there)
    mined.extra = {"products_kernel": st.get("kernel"), "pruning": st.get("prune"), **nearby}
    return mined
