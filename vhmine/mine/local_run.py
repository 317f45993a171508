"""The local engine (LocalEngine, mine.engine's interface): the exact join (mine.join) in this process, over
indexes loaded whole: the triangle of one index, only the new rows' band of a grown index when the plan holds
an earlier run of the same command (mine.grow), or the rectangle of two (`--against`). A run of any shape
with at most SMALL_PAIRS pairs to look at multiplies every one in numpy float64, without loading torch
(small_join: mine.join's small_pairs, small_new_pairs, small_pairs_across).

Reads the plan's opened index(es) and, for a band, the earlier run's alike.parquet (mine.grow); writes only
into the temporary folder the publish step hands to Mined.write_pairs: pairs.parquet / pairs.csv
(mine.write) and, for one index, rows.parquet and alike.parquet (mine.state). The Ray engine (mine.ray_run)
is its sibling: neither imports the other; mine.run chooses.
"""

from __future__ import annotations

import functools
import logging
import math

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

    from vhmine.mine.background import BACKGROUND_PAIRS, array_sims, background_sample
    from vhmine.mine.grow import index_digests
    from vhmine.mine.join import find_pairs, small_pairs
    from vhmine.mine.rank import id_ranks, ranked
    from vhmine.mine.state import id_column
    from vhmine.mine.write import pairs_frame, side, write_whole

    idx, opts = plan.a, plan.ctx.opts
    n, images = len(idx.images), idx.images
    st: dict = {}
    find = dict(device=opts.device, progress=opts.progress, kernel=opts.kernel, stats=st, prune=opts.prune)
    found, incremental, reuse, digests = _grown(plan, st, find) if plan.earlier else (None, None, "", None)
    if found is None:
        found = small_join(opts, st, n * (n - 1) // 2, small_pairs, idx.clip, idx.dino)
        if found is None:
            found = find_pairs(idx.clip, idx.dino, opts.clip, math.inf, **find)
    if digests is None:  # what a later run of the grown index checks (mine.grow); kept with the index
        digests = index_digests(idx)
    ids = id_column(images)  # (pyarrow strings; ranked and the alike pairs order them by their ranks)
    rank = id_ranks(ids)
    r = ranked(found, rank, rank, opts)
    sides = side(images, r.a, idx.locations), side(images, r.b, idx.locations)
    pairs = pairs_frame(1, *sides, r.clip_sim, r.dino_sim, r.gap)
    turn = rank[found.i] > rank[found.j]  # each CLIP-alike pair by its image ids, a < b
    lo, hi = np.where(turn, found.j, found.i), np.where(turn, found.i, found.j)
    state = (ids, digests, ids.take(lo), ids.take(hi), found.clip_sim, found.dino_sim)
    background = background_sample(n, functools.partial(array_sims, idx.clip, idx.dino), size=BACKGROUND_PAIRS)
    counts = {"images": n, "clip_alike": len(found.i), "in_box": r.in_box}
    all_pairs = n * (n - 1) // 2 <= BACKGROUND_PAIRS
    relax, nearby = ([], {}) if len(pairs) else _relax(plan, found, background, n, all_pairs=all_pairs)
    extra = {"products_kernel": st.get("kernel"), "pruning": st.get("prune"), **nearby}
    return Mined(
        idx.name,
        counts,
        functools.partial(write_whole, pairs=pairs, head_rows=opts.gallery_size, state=state),
        (found.clip_sim, found.dino_sim),
        background,
        extra={**extra, **({"incremental": incremental} if incremental else {})},
        kernel=st.get("kernel_line", ""),
        reuse=reuse,
        relax=relax,
        cuts=r.cuts,
    )


def _grown(plan, st: dict, find: dict):
    """A grown index's pairs from the earlier run's and its new rows' band (mine.grow): (the PairSet, run.json's
    `incremental`, the console's line, the rows' digests), or (None, None, "", digests) when a kept row's
    vectors changed (said in one line): then every pair is mined."""
    from vhmine.mine.grow import changed_line, grown_pairs, growth, index_digests, said
    from vhmine.mine.join import find_new_pairs, small_new_pairs

    idx, opts, earlier = plan.a, plan.ctx.opts, plan.earlier
    ids = idx.images["image_id"].to_numpy().astype(object)
    digests = index_digests(idx)  # the old rows' from the copy kept with the index, where it still checks
    g = growth(earlier, ids, digests)
    if g.changed:
        log.warning("%s", changed_line(g, idx, earlier.folder))
        return None, None, "", digests
    n, k = len(ids), len(g.new_rows)
    new = small_join(opts, st, k * (k - 1) // 2 + k * (n - k), small_new_pairs, idx.clip, idx.dino, g.new_rows)
    if new is None:
        new = find_new_pairs(idx.clip, idx.dino, g.new_rows, opts.clip, math.inf, **find)
    products = int(st.get("pairs_examined", 0))
    incremental, reuse = g.record(earlier, products), said(earlier, g, products, n)
    return grown_pairs(earlier, ids, new), incremental, reuse, digests


def _relax(plan, found, background, n_images: int, all_pairs: bool, pairs: int | None = None):
    """A run that wrote no pair: what to relax (mine.relax, from what the run holds), as (lines, run.json's
    `nearby`)."""
    from vhmine.mine.relax import for_run

    return for_run(found, background, n_images, plan.ctx.opts, plan.a.name, all_pairs=all_pairs, pairs=pairs)


def small_join(opts, stats: dict, pairs: int, join, *rows):
    """join(*rows, --clip) when the run has at most SMALL_PAIRS pairs to look at, on the CPU, with no --kernel
    named: each pair multiplied in numpy float64 (mine.join's small_pairs, small_new_pairs, small_pairs_across:
    the pairs and their similarities are the int8 join's, bit for bit) without loading torch, whose import alone
    takes longer than such a join; None for any other run. They refuse what the int8 join refuses."""
    if pairs > SMALL_PAIRS or opts.kernel not in (None, "auto") or str(opts.device or "cpu") != "cpu":
        return None
    line = f"products: every one of the {pairs:,} pairs in float64 (a run of at most {SMALL_PAIRS:,} pairs; no torch)"
    stats.update(
        pairs_examined=pairs,
        kernel={"name": "float64", "chosen": f"small run: at most {SMALL_PAIRS} pairs"},
        kernel_line=line,
    )
    return join(*rows, opts.clip, progress=opts.progress)


def mine_across(plan) -> Mined:
    """The rectangle A x B (two indexes loaded whole): side a always from A."""
    from vhmine.mine.background import BACKGROUND_PAIRS, across_sims, background_sample
    from vhmine.mine.join import PairSet, find_pairs_across, keep_across, shared_ids, small_pairs_across
    from vhmine.mine.rank import ranked
    from vhmine.mine.write import pairs_frame, side, write_whole

    a, b, opts = plan.a, plan.b, plan.ctx.opts
    na, nb = len(a.images), len(b.images)
    st: dict = {}
    found = small_join(opts, st, na * nb, small_pairs_across, a.clip, a.dino, b.clip, b.dino)
    if found is None:
        find = dict(device=opts.device, progress=opts.progress, kernel=opts.kernel, stats=st)
        found = find_pairs_across(a.clip, a.dino, b.clip, b.dino, opts.clip, math.inf, **find)
    ids_a, ids_b = a.images["image_id"].to_numpy().astype(object), b.images["image_id"].to_numpy().astype(object)
    shared = len(shared_ids(ids_a, ids_b))
    if shared:  # no pair of an image with itself, each unordered pair once (mine.join.keep_across)
        kept = keep_across(ids_a[found.i], ids_b[found.j], prefer=found.dino_sim <= opts.dino)
        found = PairSet(found.i[kept], found.j[kept], found.clip_sim[kept], found.dino_sim[kept])
    r = ranked(found, ids_a, ids_b, opts, orient=False)
    sides = side(a.images, r.a, a.locations), side(b.images, r.b, b.locations)
    pairs = pairs_frame(1, *sides, r.clip_sim, r.dino_sim, r.gap)
    pairs["index_a"], pairs["index_b"] = a.name, b.name

    counts = {"images": na + nb, "images_a": na, "images_b": nb, "shared_images": shared}
    counts.update(clip_alike=len(found.i), in_box=r.in_box)
    pairs_there = na * nb - shared - shared * (shared - 1) // 2  # of two different images, each once
    sims = functools.partial(across_sims, a, b, ids_a, ids_b, bool(shared))
    background = background_sample(na, sims, size=BACKGROUND_PAIRS, across=nb)
    all_pairs = na * nb <= BACKGROUND_PAIRS
    relax, nearby = ([], {}) if len(pairs) else _relax(plan, found, background, na + nb, all_pairs, pairs_there)
    title = f"{a.name} x {b.name}"
    return Mined(
        title,
        counts,
        functools.partial(write_whole, pairs=pairs, head_rows=opts.gallery_size),
        (found.clip_sim, found.dino_sim),
        background,
        extra={"products_kernel": st.get("kernel"), "pruning": st.get("prune"), **nearby},
        pairs=pairs_there,
        title=title,
        kernel=st.get("kernel_line", ""),
        relax=relax,
        cuts=r.cuts,
        shared=shared,
    )
