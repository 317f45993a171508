"""A run's ranking and caps: the in-box pairs ordered by gap (clip - dino) descending, ties by image ids
(never row order), then --max-per-image (greedy, in that order) and --max-pairs; what each cap left out.
The local engine ranks its PairSet here (ranked); the Ray engine's merge (mine.ray) keeps the same total
order over its tiles' files. `id_ranks` turns one collection's image ids into integers that order and tie
as the ids do, so the local engine ranks and orients pairs by numbers, not by Python strings. Reads and writes
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Ranked:
    """The kept pairs in rank order: rows a and b (of the index, or of A and B), their sims and gap; how many
    pairs were in the box, and what each cap left out."""

    a: object
    b: object
    clip_sim: object
    dino_sim: object
    gap: object
    in_box: int
    cuts: dict


def ranked(found, ids_a, ids_b, opts, *, orient: bool = True) -> Ranked:
    """The in-box pairs of a PairSet (dino_sim <= --dino), ranked and capped (rank_pairs). orient: one
    collection's pairs, each turned so its image ids read a < b (a pair's identity does not depend on row
    order); an --against rectangle keeps side a from A."""
    import numpy as np

    in_box = found.dino_sim <= opts.dino
    i, j = found.i[in_box], found.j[in_box]
    clip_sim, dino_sim = found.clip_sim[in_box], found.dino_sim[in_box]
    if orient:
        swap = ids_a[i] > ids_b[j]
        i, j = np.where(swap, j, i), np.where(swap, i, j)
    gap, cuts = clip_sim - dino_sim, {}
    order = rank_pairs(ids_a[i], ids_b[j], gap, max_per_image=opts.max_per_image, max_pairs=opts.max_pairs, cuts=cuts)
    return Ranked(i[order], j[order], clip_sim[order], dino_sim[order], gap[order], int(in_box.sum()), cuts)


def id_ranks(ids):
    """Dense ranks (int64) of image ids (a pyarrow string array): equal ids one rank, a < b as strings exactly
    when rank a < rank b. pyarrow orders by UTF-8 bytes, which is the order of code points Python compares by.
    Passed to ranked in place of the ids, they give the same order and the same ties (one collection's ids:
    --max-per-image counts an image by its rank)."""
    import pyarrow.compute as pc

    return pc.rank(ids, sort_keys="ascending", tiebreaker="dense").to_numpy().astype("int64")


def rank_pairs(
    id_a, id_b, gap, *, max_per_image: int | None = None, max_pairs: int | None = None, cuts: dict | None = None
):
    """Order of the kept pairs: gap descending, ties by image ids (never row order), then the caps. cuts: when
    given, gets how many pairs each cap left out ({"--max-per-image 3": n, "--max-pairs 100": m}, only caps
    that left some out; the pairs past --max-pairs are its, though --max-per-image might have cut some of them
    too)."""
    import numpy as np

    order = np.lexsort((id_b, id_a, -gap))
    total, per_image = len(order), 0
    if max_per_image:
        used: dict[str, int] = {}
        keep = []
        for k in order:
            a, b = id_a[k], id_b[k]
            if used.get(a, 0) < max_per_image and used.get(b, 0) < max_per_image:
                used[a] = used.get(a, 0) + 1
                used[b] = used.get(b, 0) + 1
                keep.append(k)
                if max_pairs and len(keep) >= max_pairs:
                    break
            else:
                per_image += 1
        order = np.asarray(keep, dtype=np.int64)
    if max_pairs:
        order = order[:max_pairs]
    if cuts is not None:
        record_cuts(cuts, total, per_image, len(order), max_per_image, max_pairs)
    return order


def record_cuts(cuts: dict, total: int, per_image: int, kept: int, max_per_image, max_pairs) -> dict:
    """What each cap left out of `total` in-box pairs, into `cuts` (rank_pairs' `cuts`; the Ray engine's merge
    counts the same): `per_image` refused by --max-per-image, the rest not `kept` past --max-pairs."""
    if per_image:
        cuts[f"--max-per-image {max_per_image}"] = per_image
    if total - per_image > kept:
        cuts[f"--max-pairs {max_pairs}"] = total - per_image - kept
    return cuts
