"""`vhmine mine --index A --against B`: the pairs with one image from each of two indexes (your photos
against COCO, generated images against the real ones they came from), exact as the triangle is: every
such pair with CLIP >= --clip and DINOv2 <= --dino, a rectangle of blocks instead of a triangle
(simsearch.find_pairs_across here; Ray tiles of the rectangle with --engine ray: ray_run).

Reads both indexes (their encoders must be the same, from the manifests); writes the run folder through
runfolder.finish_run: pairs.parquet / pairs.csv with side a always from A and side b from B, each path
resolved against its own index's collection root, and two more columns, index_a and index_b (the index
names); run.json's `against` names B (name, folder, manifest checksum); the gallery and scatter say A x B.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from vhmine.errors import InputError


def open_pair(root: Path, name: str, opts, *, load: bool = True):
    """Index A (a name under root) and index B (opts.against: a name under root, or a folder), refusing a pair
    that does not share encoders, in one line naming both."""
    from vhmine.embed.index import open_index, open_named_index
    from vhmine.mine.runfolder import usable_index

    a = usable_index(open_index(root, name, load_vectors=load, load_images=load))
    b = usable_index(open_named_index(opts.against, root, load=load))
    if a.folder.resolve() == b.folder.resolve():
        raise InputError(f"--against {opts.against} is index {name!r} itself: leave out --against to mine the pairs "
                         "within one index")
    ea, eb = a.manifest.get("encoders") or {}, b.manifest.get("encoders") or {}
    for enc in ("clip", "dino"):
        if (ea.get(enc) or {}) != (eb.get(enc) or {}):
            def spec(e):
                return (e.get(enc) or {}).get("spec") or (e.get(enc) or {}).get("model") or "unknown"

            raise InputError(
                f"index {a.name!r} and index {b.name!r} were embedded with other {enc} encoders ({spec(ea)} and "
                f"{spec(eb)}): their vectors cannot be compared; embed one collection again with the other's "
                "encoders (vhmine embed --clip-model / --dino-model)")
    return a, b


def mine_across(root: Path, name: str, opts, run_dir: Path, warnings: list[str], t0: float):
    """The run folder of A x B (a job.MineResult)."""
    if opts.engine == "ray":
        from vhmine.mine.ray_run import mine_ray

        a, b = open_pair(root, name, opts, load=False)
        return mine_ray(a, opts, run_dir, warnings, t0, against=b)
    from vhmine.mine.runfolder import (
        BACKGROUND_PAIRS, MineResult, against_record, background_sample, cross_sims, finish_run, rank_pairs,
        rerun_command,
    )
    from vhmine.mine.simsearch import find_pairs_across
    from vhmine.mine.write import pairs_frame, side, write_table

    a, b = open_pair(root, name, opts)
    na, nb = len(a.images), len(b.images)
    st: dict = {}
    found = find_pairs_across(a.clip, a.dino, b.clip, b.dino, opts.clip, math.inf, device=opts.device,
                              progress=opts.progress, kernel=opts.kernel, stats=st)
    in_box = found.dino_sim <= opts.dino
    i, j = found.i[in_box], found.j[in_box]
    clip_sim, dino_sim = found.clip_sim[in_box], found.dino_sim[in_box]
    ids_a, ids_b = a.images["image_id"].to_numpy(), b.images["image_id"].to_numpy()
    gap = clip_sim - dino_sim
    order = rank_pairs(ids_a[i], ids_b[j], gap, max_per_image=opts.max_per_image, max_pairs=opts.max_pairs)
    i, j, clip_sim, dino_sim, gap = i[order], j[order], clip_sim[order], dino_sim[order], gap[order]
    pairs = pairs_frame(1, side(a.images, i, a.location), side(b.images, j, b.location), clip_sim, dino_sim, gap)
    pairs["index_a"], pairs["index_b"] = a.name, b.name

    def write_pairs(tmp: Path):
        write_table(tmp, pairs)
        return len(pairs), pairs.head(opts.gallery_size)

    counts = {"images": na + nb, "images_a": na, "images_b": nb, "clip_alike": int(len(found)),
              "in_box": int(in_box.sum())}
    background = background_sample(na, lambda x, y: (cross_sims(a.clip.__getitem__, b.clip.__getitem__, x, y),
                                                      cross_sims(a.dino.__getitem__, b.dino.__getitem__, x, y)),
                                   size=BACKGROUND_PAIRS, across=nb)
    relax = None
    if not len(order):
        from vhmine.mine.relax import nearby

        relax = nearby(found, background, na + nb, opts.clip, opts.dino, all_pairs=na * nb <= BACKGROUND_PAIRS,
                       base_command=rerun_command(name, opts), pairs=na * nb)
    extra = {"against": against_record(b), "products_kernel": st.get("kernel"),
             **({"nearby": relax.record()} if relax else {})}
    written = finish_run(run_dir, a, opts, counts, write_pairs, (found.clip_sim, found.dino_sim), background,
                         warnings, extra=extra, pairs=na * nb, title=f"{a.name} x {b.name}")
    return MineResult(run_dir, f"{a.name} x {b.name}", na + nb, counts["clip_alike"], counts["in_box"], written,
                      time.time() - t0, warnings, relax=relax.lines if relax else [], kernel=st.get("kernel_line", ""))
