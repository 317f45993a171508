"""The search behind simsearch's entries: the checks, the products kernel (calibrate), the quantisation (quantise,
or an earlier join's kept for a band: blocks.Quantiser), the parts of the shape (band.Part), the pruning choice
(prune), and the blocks through band's drivers, in a pool of threads on a CPU. Reads the arrays it is given;
writes nothing (the kernel calibration's cache aside).

A shape is what `prepare` gives: Shape("triangle"), Shape("band", new_rows) or Shape("across", na) (rows A,
then B, stacked).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from vhmine.errors import InputError
from vhmine.mine.join import calibrate, kernels
from vhmine.mine.join.band import Part, gather, mine_parts, up
from vhmine.mine.join.blocks import Quantiser, quantise_block, thresholds_of
from vhmine.mine.join.quantise import ALIGN, FastPass, fast_pass
from vhmine.mine.join.rowcheck import check_limits

log = logging.getLogger("vhmine.mine.join.simsearch")

_DEFAULT_BLOCK = {"cpu": 8192, "cuda": 16384}


@dataclass(frozen=True, eq=False)
class Shape:
    kind: str  # "triangle", "band" or "across"
    new_rows: np.ndarray | None = None  # a band's, sorted and distinct
    na: int = 0  # across: rows of A (then B's)


def block_rows(block_size: int | None, device_type: str) -> int:
    if block_size is not None and block_size < 1:
        raise InputError(f"block size must be at least 1, got {block_size}")
    return -(-(block_size or _DEFAULT_BLOCK.get(device_type, 4096)) // ALIGN) * ALIGN


@dataclass(frozen=True, eq=False)
class Quantised:
    """The quantised rows every part reads, and the thresholds: thresh (every pair with float64 CLIP sim
    >= clip_min reaches it), sure (a product there proves clip_min), margin; fp: the FastPass of all rows
    in the caller's order when there is one (stats["quantised"]), kept: the earlier join's, when reused."""

    thresh: int
    sure: int | None
    margin: float
    rotated: bool
    fp: FastPass | None = None
    new_q: np.ndarray | None = None  # a band's new rows, from the kept quantiser (kept is not None)
    kept: FastPass | None = None


def others(n: int, rows: np.ndarray) -> np.ndarray:
    """The row numbers in [0, n) not in rows, ascending (a mask: setdiff1d sorts, 100x slower at 200,000)."""
    keep = np.ones(n, bool)
    keep[rows] = False
    return np.flatnonzero(keep)


def reusable(kept: FastPass | None, clip, new_rows, rotate, levels: int) -> str:
    """Why an earlier join's quantisation of the rows other than new_rows cannot be reused here ("" if it
    can): for a band only, of those very rows (their count and width), with levels the kernel keeps exact,
    turned as `rotate` asks."""
    if kept is None:
        return "none kept"
    n, d = clip.shape
    if kept.n != n - len(new_rows) or kept.q.shape[1] != -(-d // 8) * 8:
        raise InputError(
            f"quantised holds {kept.n:,} rows of width {kept.q.shape[1]}, not the {n - len(new_rows):,} rows "
            f"other than new_rows of width {d}: give the earlier join's quantisation of exactly those rows"
        )
    if kept.qmax > levels:
        return f"its {kept.qmax} levels are more than this products kernel keeps exact ({levels})"
    if rotate is not None and bool(kept.dims) != bool(rotate):
        return f"it was {'' if kept.dims else 'not '}turned, and rotate={rotate} asks otherwise"
    return ""


def quantise_shape(clip, shape: Shape, clip_min: float, rotate, levels: int, pool, kept) -> Quantised:
    """The shape's quantisation: all rows (fast_pass), or for a band with an earlier join's quantisation
    of the other rows (kept, reusable), only the new rows with that same quantiser; the thresholds follow
    from the error measures of every row either way (blocks.thresholds_of), so the search stays exact."""
    why = reusable(kept, clip, shape.new_rows, rotate, levels) if shape.kind == "band" else "not a band"
    if why:
        if kept is not None:
            log.info("the kept quantisation is not reused: %s", why)
        fp = fast_pass(clip, clip_min, rotate, workers=pool, qmax=levels)
        return Quantised(fp.thresh, fp.sure, fp.margin, fp.rotated, fp=fp)
    qz = Quantiser(clip.shape[1], kept.scale, kept.qmax, kept.dims)
    old = others(len(clip), shape.new_rows)
    at = np.linspace(0, len(old) - 1, min(len(old), 64)).astype(np.int64)
    q_at, _ = quantise_block(clip[old[at]], qz)  # a guard against another collection's quantisation (a turned
    if np.abs(q_at[: len(at)].astype(np.int16) - kept.q[at]).max(initial=0) > 1:  # row may round 1 apart)
        raise InputError(
            "quantised does not match these rows (its quantisation of a sample of them differs): give the earlier "
            "join's quantisation of the same rows, or none"
        )
    new_q, new_stats = quantise_block(clip[shape.new_rows], qz)
    thresh, sure, err = thresholds_of(qz, kept.stats | new_stats, clip_min)
    return Quantised(thresh, sure, err, bool(kept.dims), new_q=new_q, kept=kept)


def parts_of(shape: Shape, qd: Quantised, n: int, device) -> list[Part]:
    """The parts the shape's pairs are searched in (band.Part)."""
    import functools

    import torch

    t = functools.partial(torch.as_tensor, device=device)  # (numpy's memory itself on a CPU, as from_numpy's)
    if shape.kind == "triangle":
        x = t(qd.fp.q)
        return [Part(x, x, n, n, True)]
    if shape.kind == "across":
        na, nb, q = shape.na, n - shape.na, qd.fp.q
        if not na or not nb:
            return []
        y = q[na:] if na % ALIGN == 0 else np.concatenate([q[na:n], np.zeros((up(nb) - nb, q.shape[1]), q.dtype)])
        return [Part(t(q[: up(na)]), t(y), na, nb, False, ymap=na)]
    new, k = shape.new_rows, len(shape.new_rows)
    if not k:
        return []
    if qd.kept is not None:  # the new rows against the kept rows, and against each other
        x = t(qd.new_q)
        old = others(n, new)
        return [Part(x, t(qd.kept.q), k, len(old), False, new, old), Part(x, x, k, k, True, new, new)]
    x = gather(qd.fp.q, new)
    is_new = np.zeros(n, bool)
    is_new[new] = True
    return [Part(t(x), t(qd.fp.q), k, n, False, new, None, is_new)]


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
        clip_min, dino_max = check_limits(clip_min, dino_max)  # NaN is named, not met as a bare ValueError later
        with kernels.blas_threads(1):
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
        _record(stats, qd, total, blocks, examined, said + (chosen.record(), chosen.line()))  # (pruning: as mined)
    return found, shape


def _pool(threads: int):
    """One pool for all of a join, its threads' torch single-threaded (band.mine_in_threads), and this thread's
    too (torch's pool would spin beside them)."""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    torch.set_num_threads(1)
    one = dict(initializer=torch.set_num_threads, initargs=(1,))
    return ThreadPoolExecutor(threads, thread_name_prefix="vhmine-mine", **one)


def _record(stats: dict, qd, total: int, blocks: int, examined: int, said: tuple) -> None:
    """find_pairs' stats (see its docstring); said: the kernel's line and record, the pruning's record and line."""
    kernel_line, kernel, prune, prune_line = said
    stats.update(margin=qd.margin, candidates=total, rotated=qd.rotated, blocks=blocks, pairs_examined=examined)
    stats.update(kernel=kernel, kernel_line=kernel_line, prune=prune, prune_line=prune_line, quantised=qd.fp)
