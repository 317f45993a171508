"""`vhmine mine --index A --against B`: the pairs with one image from each of two indexes (your photos
against COCO, generated images against the real ones they came from), exact as the triangle is: every
such pair with CLIP >= --clip and DINOv2 <= --dino, a rectangle of blocks instead of a triangle
(mine.join.find_pairs_across in mine.local_run; Ray tiles of the rectangle with --engine ray: mine.ray_run).
This module opens the two indexes and refuses a pair that cannot be mined together. An image in both
indexes (the same image id) is never paired with itself, and a pair of two such images is written once
(mine.join.shared); the summary and run.json's counts.shared_images say how many there were.

Reads both indexes (their encoders must be the same, from the manifests); writes the run folder through
runfolder.finish_run: pairs.parquet / pairs.csv with side a always from A and side b from B, each path
resolved against its own index's collection root, and two more columns, index_a and index_b (the index
names); run.json's `against` names B (name, folder, manifest checksum); the gallery and scatter say A x B.
"""

from __future__ import annotations

from pathlib import Path

from vhmine.errors import InputError


def open_pair(root: Path, name: str, opts, *, load: bool = True, least: int = 1):
    """Index A (a name under root) and index B (opts.against: a name under root, or a folder), refusing a pair
    that does not share encoders, in one line naming both. least: the fewest images either may have (one: a
    1 x N rectangle has pairs)."""
    from vhmine.index import open_index, open_named_index
    from vhmine.mine.runfolder import usable_index

    a = usable_index(open_index(root, name, load_vectors=load, load_images=load), least)
    b = usable_index(open_named_index(opts.against, root, load=load), least)
    if a.folder.resolve() == b.folder.resolve():
        raise InputError(
            f"--against {opts.against} is index {name!r} itself: leave out --against to mine the pairs within one index"
        )
    ea, eb = a.manifest.get("encoders") or {}, b.manifest.get("encoders") or {}
    for enc in ("clip", "dino"):
        if (ea.get(enc) or {}) != (eb.get(enc) or {}):

            def spec(e, enc=enc):
                return (e.get(enc) or {}).get("spec") or (e.get(enc) or {}).get("model") or "unknown"

            raise InputError(
                f"index {a.name!r} and index {b.name!r} were embedded with other {enc} encoders ({spec(ea)} and "
                f"{spec(eb)}): their vectors cannot be compared; embed one collection again with the other's "
                "encoders (vhmine embed --clip-model / --dino-model)"
            )
    return a, b
