"""The exact thresholded join, a library that knows nothing of runs, folders or Ray: every pair of rows with
CLIP cosine >= clip_min and DINOv2 cosine <= dino_max, equal as a set to a float64 brute force, both
thresholds inclusive. Reads the row arrays it is given; writes no files (a measured choice of products
kernel is cached per machine: calibrate).

One public entry per shape:

- `find_pairs(clip, dino, clip_min, dino_max)`: the triangle of one collection's rows (i < j);
- `find_new_pairs(clip, dino, new_rows, clip_min, dino_max)`: the band of pairs that touch new rows of a grown
  collection (an earlier join of the other rows plus these is a full join, bit for bit);
- `find_pairs_across(clip_a, dino_a, clip_b, dino_b, clip_min, dino_max)`: the rectangle of one collection's
  rows against another's.

Beside them: `PairSet` (what they return), `pair_sims` (the float64 similarity every result carries),
`merge`, the references `brute_force_pairs` / `brute_force_across` with `assert_same_pairs`,
`small_pairs`, `small_new_pairs`, `small_pairs_across` (a small collection's triangle, band or
rectangle in float64, without torch), `keep_across` / `shared_ids` (a rectangle's pairs when the two
collections share images), `levels_of` (a products kernel named, checked).

The tile interface (what mine.ray's tasks run, one block or tile at a time, quantised with one streaming
pass's parameters): `Quantiser`, `BlockStats`, `choose_turn`, `sample_rows`, `scan_block`, `threshold`,
`quantise_block`, `tile_candidates`, `cross_candidates`, `tile_kernel`, `exact_pairs`, `block_bytes`,
`qmax_for`, `ALIGN`; the checks a task makes of its rows (`check_rows`, `check_limits`, `check_norms`,
`squared_norms`) and the pruning of a tile (`tile_centres`, `sort_block`). Inside, a join passes down them
once: simsearch (the entries), search (the orchestrator: one call to each part below, in turn), rowcheck
(what is refused before starting, the shape and rows the search is given, the block size, and what the
checks share with the layers above: the unit roundoff, the threads), calibrate and kernels (the products
kernels and the measured choice; kernels.qmax_for, the levels they keep exact), blocks (a shape's
quantisation, and blocks quantised with one streaming pass's parameters: the Ray engine's tiles), quantise
(the int8 fast pass and its proven error bound), band (the parts: rows against rows, and the drivers that
run their blocks), prune (exact pruning of products before they are computed), products (one block's
products and candidates), recheck (the exact re-check), pairset (what the entries return), digests.
"""

from __future__ import annotations

from vhmine.mine.join.blocks import (
    BlockStats,
    Quantiser,
    choose_turn,
    cross_candidates,
    exact_pairs,
    quantise_block,
    sample_rows,
    scan_block,
    threshold,
    tile_candidates,
    tile_kernel,
)
from vhmine.mine.join.kernels import levels_of
from vhmine.mine.join.products import block_bytes
from vhmine.mine.join.prune import sort_block, tile_centres
from vhmine.mine.join.quantise import ALIGN, qmax_for
from vhmine.mine.join.recheck import pair_sims
from vhmine.mine.join.rowcheck import check_limits, check_norms, squared_norms
from vhmine.mine.join.shared import keep_across, shared_ids
from vhmine.mine.join.simsearch import (
    PairSet,
    assert_same_pairs,
    brute_force_across,
    brute_force_pairs,
    check_rows,
    find_new_pairs,
    find_pairs,
    find_pairs_across,
    merge,
    no_pairs,
    small_new_pairs,
    small_pairs,
    small_pairs_across,
)

__all__ = [
    "ALIGN",
    "BlockStats",
    "PairSet",
    "Quantiser",
    "assert_same_pairs",
    "block_bytes",
    "brute_force_across",
    "brute_force_pairs",
    "check_limits",
    "check_norms",
    "check_rows",
    "choose_turn",
    "cross_candidates",
    "exact_pairs",
    "find_new_pairs",
    "find_pairs",
    "find_pairs_across",
    "keep_across",
    "levels_of",
    "merge",
    "no_pairs",
    "pair_sims",
    "qmax_for",
    "quantise_block",
    "sample_rows",
    "scan_block",
    "shared_ids",
    "small_new_pairs",
    "small_pairs",
    "small_pairs_across",
    "sort_block",
    "squared_norms",
    "threshold",
    "tile_candidates",
    "tile_centres",
    "tile_kernel",
]
