"""The lines scripts/bench_mine.py prints past its data sets' runs (imported by it; not run on its own):

- --incremental N: 1% new rows of N CLIP-shaped rows mined against a full mine of all N, in wall and CPU time
  (the growth's median of runs before and after the full mine, each run's pairs checked);
  the other rows' mine is done before the clock, and its quantisation kept (find_pairs(quantised=...)), so
  the band quantises and lays out only the new rows; the clock also holds the rows' digests as the local
  engine takes them (vhmine.index.digests: every row's from the file `vhmine embed` kept as it wrote the
  grown index's vector files, the new rows appended after the old ones, in a temporary folder: the files as
  that embed recorded them, so no row hashed and no byte checked), beside every row hashed again;
- --against N: N x N rows across two collections against the same 2N rows as one triangle, in wall and CPU time;
- --pruning: vhmine.mine.join.prune at --clip 0.9 and 0.95 on CLIP-shaped rows and on rows in families of
  near copies (made here): what the measure on a sample chose, the share of products skipped when forced on,
  its CPU time against the unpruned search, and the share an oracle that knew every piece's largest product
  would skip (what no bound can beat); with --pruning-ray, the same through the Ray engine (a local cluster).

Each line says `pairs identical` only when the pair sets and their float64 similarities are equal bit for bit
(else `pairs DIFFER`, and bench_mine.py exits 1). Every time ratio is CPU time over CPU time measured in the
same run (scripts/bench_timing.py), the wall time's beside it. Writes nothing but the --incremental line's
temporary folder.
"""

from __future__ import annotations

import functools
import os

import numpy as np
from bench_timing import measure

from vhmine.mine.join import PairSet, assert_same_pairs, find_pairs, find_pairs_across, merge


def _same(got: PairSet, want: PairSet, across: bool = False) -> bool:
    """Whether got and want are the same pairs with bit-equal similarities, in the same (sorted) order."""
    try:
        assert_same_pairs(got, want, atol=0.0, across=across)
    except AssertionError as err:
        print(f"  pairs differ: {err}")
        return False
    return all(np.array_equal(getattr(got, f), getattr(want, f)) for f in ("i", "j", "clip_sim", "dino_sim"))


def _verdict(same: bool) -> str:
    return "pairs identical" if same else "pairs DIFFER"


def clocked(fn, *args, **kw):
    """(fn(*args, **kw), wall seconds, CPU seconds of every thread of this process)."""
    out, cpu, wall = measure(fn, *args, **kw)
    return out, wall, cpu


GROWTH_RUNS = 5  # the growth's runs before the full mine (50x longer, timed once), and as many after it


def incremental(n: int, args, full_mine, make) -> bool:
    """The incremental line: 1% of n CLIP-shaped rows (random rows) are new; the other rows' full mine,
    renumbered into the grown set, is done before the clock, its quantisation kept; timed:
    find_pairs(new_rows=..., quantised=...) plus the merge with those pairs and the rows' digests from the kept
    file (_kept_digests), the median of GROWTH_RUNS runs before and as many after a full mine of all n
    (full_mine(clip, dino): it, its wall and CPU seconds, its stats); then every row's digest taken again, as
    before the file, and whether the two agree."""
    clip, dino = make(n, args.dim, args.dino_dim, args.seed)
    new = np.sort(np.random.default_rng(args.seed + 2).choice(n, max(1, n // 100), replace=False))
    old = np.setdiff1d(np.arange(n), new)
    kw = dict(device=args.device, block_size=args.block_size, kernel=args.kernel)
    kept: dict = {}
    earlier = find_pairs(clip[old], dino[old], args.clip, args.dino, stats=kept, **kw)
    earlier = PairSet(old[earlier.i], old[earlier.j], earlier.clip_sim, earlier.dino_sim)
    st: dict = {}
    digests_of, stored, tmp = _kept_digests(clip, dino, old, new)

    def grow():
        band = find_pairs(clip, dino, args.clip, args.dino, new_rows=new, quantised=kept["quantised"], stats=st, **kw)
        return band, merge([(p.i, p.j, p.clip_sim, p.dino_sim) for p in (earlier, band)]), digests_of()

    # a growth is short: the median of runs before and after the full mine, so that a slower minute of a
    # shared machine (another tenant on the core's other thread) weighs on both sides alike
    runs = [clocked(grow) for _ in range(GROWTH_RUNS)]
    full, t_full, c_full, fst = full_mine(clip, dino)
    runs += [clocked(grow) for _ in range(GROWTH_RUNS)]
    (band, _, dig), _, _ = runs[-1]
    t_inc, c_inc = (float(np.median([r[k] for r in runs])) for k in (1, 2))
    tmp.cleanup()
    same = all(_same(r[0][1], full) for r in runs)
    from vhmine.index import row_digests

    print(
        f"incremental: +1% rows at N={n}: {t_inc:.2f} s ({c_inc:.2f} CPU-s) against a full mine {t_full:.2f} s "
        f"({c_full:.2f} CPU-s) (CPU time ratio {c_inc / c_full:.4f}, wall time {t_inc / t_full:.4f}), {_verdict(same)}",
        flush=True,
    )
    spread = sorted(r[2] / c_full for r in runs)
    print(
        f"  the growth's median of {len(runs)} runs ({GROWTH_RUNS} before the full mine, {GROWTH_RUNS} after it); "
        f"their CPU time ratios {spread[0]:.4f} to {spread[-1]:.4f}",
        flush=True,
    )
    print(
        f"  products ratio {st['pairs_examined'] / fst['pairs_examined']:.4f} ({st['pairs_examined']:,} of "
        f"{fst['pairs_examined']:,} row pairs, {st['blocks']} of {fst['blocks']} blocks); {len(new):,} new rows, "
        f"{len(band):,} new pairs of {len(full):,}; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    every, t_all, c_all = clocked(row_digests, stored[0], stored[1], workers=2)
    same_digests = bool((every == dig[0]).all())
    print(
        f"  digests: {dig[1]['rows_digested']:,} rows hashed, {dig[1]['rows_stored']:,} read from the kept file, "
        f"{dig[1]['rows_checked']:,} rows' bytes checked against it (the vector files as the embed recorded them), "
        f"in {dig[2]:.3f} s ({dig[3]:.3f} CPU-s) of the above; every row hashed again (as before the file): "
        f"{t_all:.2f} s ({c_all:.2f} CPU-s); digests {'identical' if same_digests else 'DIFFER'}",
        flush=True,
    )
    same &= same_digests
    return same


def _kept_digests(clip, dino, old, new):
    """(a function giving the grown index's row digests as the local engine takes them, with its stats and
    its wall and CPU seconds; the grown index's rows; the temporary folder): the old rows first and the new
    ones after them (as `vhmine embed` appends), written as an index's vector files (clip.faiss, dino.faiss)
    and their digests kept there before the clock as `vhmine embed` keeps them (index.keep_for_files: the
    earlier embed's file read where it checks, the new rows and the old rows' last chunk hashed, the files'
    states recorded once they settled). The clock holds what `vhmine mine` does (mine.grow.index_digests):
    the files' states taken (as open_index takes them before it reads the rows: the rows in memory here are
    the files'), then the digests."""
    import tempfile
    from pathlib import Path

    from vhmine.index import DIGEST, file_states, keep_for_files, row_digests, stored_digests, write_faiss

    tmp = tempfile.TemporaryDirectory(prefix="bench-digests-")
    folder = Path(tmp.name)
    digest = functools.partial(row_digests, workers=2)
    order = np.concatenate([old, new])
    rows = clip[order], dino[order]
    for k in (len(old), len(order)):  # what the earlier embed kept, then the embed that grew the index
        write_faiss(folder / "clip.faiss", rows[0][:k])
        write_faiss(folder / "dino.faiss", rows[1][:k])
        keep_for_files(folder, DIGEST, digest)

    def digests_of():
        info: dict = {}

        def take():
            return stored_digests(folder, *rows, DIGEST, digest, info, seen=file_states(folder))

        got, t, c = clocked(take)
        return got, info, t, c

    return digests_of, rows, tmp


def against(n: int, args, full_mine, make) -> bool:
    """The against line: n x n CLIP-shaped rows (the first n of 2n, then the rest) by find_pairs_across,
    against the same 2n rows mined as one triangle (full_mine), whose pairs with one row on each side
    must be the same."""
    clip, dino = make(2 * n, args.dim, args.dino_dim, args.seed)
    st: dict = {}
    kw = dict(device=args.device, block_size=args.block_size, kernel=args.kernel, stats=st)
    rect, t_rect, c_rect = clocked(
        find_pairs_across, clip[:n], dino[:n], clip[n:], dino[n:], args.clip, args.dino, **kw
    )
    full, t_full, c_full, fst = full_mine(clip, dino)
    keep = (full.i < n) & (full.j >= n)
    same = _same(rect, PairSet(full.i[keep], full.j[keep] - n, full.clip_sim[keep], full.dino_sim[keep]), across=True)
    print(
        f"against: {n:,} x {n:,} in {t_rect:.2f} s ({c_rect:.2f} CPU-s) against the same {2 * n:,} rows as one "
        f"triangle in {t_full:.2f} s ({c_full:.2f} CPU-s) (products ratio "
        f"{st['pairs_examined'] / fst['pairs_examined']:.4f}, CPU time ratio {c_rect / c_full:.4f}, wall time "
        f"{t_rect / t_full:.4f}), {_verdict(same)}",
        flush=True,
    )
    print(
        f"  {st['blocks']} of {fst['blocks']} blocks, {len(rect):,} pairs across of {len(full):,}; load average "
        f"{os.getloadavg()[0]:.2f}",
        flush=True,
    )
    return same


def growth_lines(args, make) -> bool:
    """--incremental and --against (make: bench_mine.make_clip_like); a full mine of the same rows is timed
    once for both when they share it."""
    cache: dict = {}

    def full_mine(clip, dino):
        if len(clip) not in cache:
            st: dict = {}
            kw = dict(device=args.device, block_size=args.block_size, kernel=args.kernel, stats=st)
            out, wall, cpu = clocked(find_pairs, clip, dino, args.clip, args.dino, **kw)
            cache[len(clip)] = out, wall, cpu, st
        return cache[len(clip)]

    same = True
    if args.incremental:
        print(f"\n== growth: CLIP-shaped rows, seed={args.seed} --clip {args.clip} --dino {args.dino}", flush=True)
        same &= incremental(args.incremental, args, full_mine, make)
    if args.against:
        same &= against(args.against, args, full_mine, make)
    return same


def families(n: int, dim: int, dino_dim: int, seed: int, topics: int = 16):
    """Rows in families of about 4 near copies (CLIP cosine about 0.99), the families in a few topics
    (cosine about 0.86 within a topic, 0 across), rows in random order: where pruning can pay."""
    rng = np.random.default_rng(seed)
    fam = rng.integers(0, max(1, n // 4), n)
    clip = (
        rng.standard_normal((topics, dim))[fam % topics]
        + 0.4 * rng.standard_normal((max(1, n // 4), dim))[fam]
        + 0.05 * rng.standard_normal((n, dim))
    ).astype(np.float32)
    clip /= np.linalg.norm(clip, axis=1, keepdims=True)
    dino = rng.standard_normal((n, dino_dim), dtype=np.float32)
    return clip, dino / np.linalg.norm(dino, axis=1, keepdims=True)


def oracle_share(clip, clip_min: float, kernel, piece: int = 1024) -> float:
    """The share of products an oracle would skip: pieces (piece x piece of the upper triangle, as the miner
    cuts its blocks on a CPU, rows in prune's order) whose largest integer product is below the threshold.
    No bound skips more."""
    import torch

    from vhmine.mine.join import prune
    from vhmine.mine.join.band import gather
    from vhmine.mine.join.quantise import fast_pass, sample_rows

    n = len(clip)
    fp = fast_pass(clip, clip_min)
    k = kernel.kernel
    centres = prune.kmeans(fp.q[sample_rows(n)], -(-n // prune.GROUP), iters=3)
    q = torch.from_numpy(gather(fp.q, np.argsort(prune.assign(fp.q[:n], prune.int_centres(centres), k, "cpu"))))
    buf = torch.empty(piece * piece, dtype=getattr(torch, k.out))
    skipped = total = 0.0
    for r in range(0, n, piece):
        for c in range(r, n, piece):
            x, y = q[r : r + piece], q[c : c + piece]  # (zero rows past n, as the miner's blocks)
            prod = k.mm(k.left(x), k.right(y), buf[: len(x) * len(y)].view(len(x), len(y)))
            nx, ny = min(piece, n - r), min(piece, n - c)
            top = prod[:nx, :ny].max().item()
            area = nx * ny / (2 if r == c else 1)
            total += area
            skipped += area if top < fp.thresh else 0.0
    return skipped / total


def pruning_lines(args, make, ray: bool = False) -> bool:
    """--pruning: at --clip 0.9 and 0.95, on CLIP-shaped rows (make) and on families: the choice measured
    on a sample, and forced on against off (CPU time, the share skipped, pairs identical), with the oracle's
    share (and with ray, find_pairs_ray forced on and off)."""
    from vhmine.mine.join import calibrate

    same = True
    choice = calibrate.choose("cpu", -(-args.dim // 8) * 8)
    print(f"\n== pruning: N={args.n:,}, {args.dim}-d rows, --dino {args.dino}", flush=True)
    for name, maker in (("CLIP-shaped", make), ("families", families)):
        clip, dino = maker(args.n, args.dim, args.dino_dim, args.seed)
        for clip_min in (0.9, 0.95):
            st, on_st = {}, {}
            kw = dict(device="cpu", block_size=args.block_size, kernel=args.kernel)
            auto, _, c_auto = clocked(find_pairs, clip, dino, clip_min, args.dino, stats=st, **kw)
            on, _, c_on = clocked(find_pairs, clip, dino, clip_min, args.dino, prune=True, stats=on_st, **kw)
            off, _, c_off = clocked(find_pairs, clip, dino, clip_min, args.dino, prune=False, **kw)
            ok = _same(on, off) and _same(auto, off)
            same &= ok
            print(
                f"pruning at --clip {clip_min} ({name}): {st['prune_line']}, {c_auto:.2f} CPU-s; forced on: "
                f"{100 * on_st['prune']['skipped']:.1f}% of the products skipped (an oracle: "
                f"{100 * oracle_share(clip, clip_min, choice, min(1024, args.block_size or 8192)):.1f}%), "
                f"{c_on:.2f} CPU-s against {c_off:.2f} off "
                f"({c_on / c_off:.2f} x), {_verdict(ok)}; load average {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            if ray:
                same &= ray_line(clip, dino, clip_min, args, off, name)
    return same


def ray_line(clip, dino, clip_min: float, args, want: PairSet, name: str) -> bool:
    """find_pairs_ray at clip_min, its choice measured and forced on, against the local pairs (want)."""
    from vhmine.mine.ray import find_pairs_ray

    lines, ok = [], True
    for prune in (None, True):
        st: dict = {}
        got, wall, _ = clocked(find_pairs_ray, clip, dino, clip_min, args.dino, prune=prune, stats=st)
        ok &= _same(got, want)
        rec = st["prune"]
        lines.append(
            f"{'chosen' if prune is None else 'forced'}: {'on' if rec['chosen'] else 'off'} (sample share "
            f"{rec['sample_share']}), skipped {rec['skipped']}, {wall:.1f} s over {st['blocks']} tiles"
        )
    print(f"  ray at --clip {clip_min} ({name}): {'; '.join(lines)}, {_verdict(ok)}", flush=True)
    return ok
