"""The search behind simsearch's entries, its parts in one pass down the layers: the rows checked and the shape
(rowcheck.prepared: the checks, the BLAS threads, the block size), the products kernel (calibrate), the
quantisation (blocks.quantise_shape: quantise's fast pass, or an earlier join's kept for a band), the parts of
the shape (band.parts_of), the pruning choice (prune), and the blocks through band's drivers, in a pool of
threads on a CPU. Reads the arrays it is given; writes nothing (the kernel calibration's cache aside).

A shape is what `prepare` gives (rowcheck.prepared, prepared_across): Shape("triangle"), Shape("band",
new_rows) or Shape("across", na) (rows A, then B, stacked).
"""

from __future__ import annotations

import logging

from vhmine.mine.join import calibrate
from vhmine.mine.join.band import mine_parts, parts_of, up
from vhmine.mine.join.blocks import quantise_shape
from vhmine.mine.join.rowcheck import blas_threads, block_rows, check_limits

log = logging.getLogger("vhmine.mine.join.simsearch")


def mine(
    prepare,
    clip_min,
    dino_max,
    *,
    device=None,
    block_size=None,
    max_candidates=50_000_000,
    progress=False,
    rotate=None,
    stats=None,
    workers=None,
    desc="mining pairs",
    kernel=None,
    quantised=None,
    prune=None,
) -> tuple[list, object]:
    """(found, shape): the re-checked parts of the result ((i, j, clip_sim, dino_sim) in the caller's numbers,
    i and j in any order) and the Shape. prepare(pool) -> ((clip, dino, clip_n2, dino_n2), shape): the
    checked rows. Options: simsearch.find_pairs'."""
    import torch

    from vhmine.config import resolve_device
    from vhmine.mine.join import prune as pruning

    threads, torch_threads = max(1, workers or torch.get_num_threads()), torch.get_num_threads()
    pool = _pool(threads) if threads > 1 else None
    # numpy's BLAS in one thread throughout: beside find_pairs' own threads its pool spins (a busy 2-core machine
    # runs it 100x slower), and after each of the small products here (the turn's, the pruning's sample) its
    # idle threads spin for up to 0.1 s (0.1-0.2 CPU-s of a 2.5 CPU-s mine at N = 50,000)
    try:
        with blas_threads(1):
            clip_min, dino_max = check_limits(clip_min, dino_max)  # NaN is named, not met as a bare ValueError later
            (clip, dino, clip_n2, dino_n2), shape = prepare(pool)
            clip_min, dino_max, n = float(clip_min), float(dino_max), len(clip)
            if (
                n < 2
                or (shape.kind == "band" and not len(shape.new_rows))
                or (shape.kind == "across" and not (0 < shape.na < n))
            ):
                if stats is not None:
                    stats.update(candidates=0, blocks=0, pairs_examined=0)
                return [], shape
            block_rows(block_size, "cpu")  # a bad size is named before the device is looked at
            device = resolve_device(device or None)  # a bad name or absent CUDA says so, not torch's traceback
            choice = calibrate.choose(device, -(-clip.shape[1] // 8) * 8, kernel=kernel)
            said = choice.line(), choice.record()  # (the caller says the line once: stats' kernel_line)
            log.debug("%s", said[0])
            qd = quantise_shape(clip, shape, clip_min, rotate, choice.kernel.levels(clip.shape[1]), pool, quantised)
            parts = parts_of(shape, qd, n, device)
            block = min(block_rows(block_size, device.type), up(n))
            chosen = pruning.choose(parts, qd, clip, shape, prune, choice, block, device)
            parts, blocks, examined = chosen.parts, 0, 0
            for p in parts:
                blocks, examined = blocks + len(p.tiles(block)), examined + p.pairs()
            rows = (clip, dino, clip_min, dino_max, (clip_n2, dino_n2))
            how = (block, device, choice, pool, threads, torch_threads)
            found, total = mine_parts(rows, qd, parts, how, max_candidates, progress, desc, blocks)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        torch.set_num_threads(torch_threads)  # (the pool's threads set theirs, and torch's own count, to 1)
    log.debug("fast pass: margin %.4f, %d candidates", qd.margin, total)
    if stats is not None:
        # find_pairs' stats (see its docstring): the kernel's line and record, the pruning's (as mined)
        stats.update(margin=qd.margin, candidates=total, rotated=qd.rotated, blocks=blocks, pairs_examined=examined)
        stats.update(kernel=said[1], kernel_line=said[0], prune=chosen.record(), prune_line=chosen.line())
        stats.update(quantised=qd.fp)
    return found, shape


def _pool(threads: int):
    """One pool for all of a join, its threads' torch single-threaded (band.mine_in_threads), and this thread's
    too (torch's pool would spin beside them)."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    torch.set_num_threads(1)
    one = dict(initializer=torch.set_num_threads, initargs=(1,))
    return ThreadPoolExecutor(threads, thread_name_prefix="vhmine-mine", **one)
