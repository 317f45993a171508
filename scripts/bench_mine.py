"""Benchmark vhmine.simsearch.find_pairs against faiss IndexFlatIP + range_search on the same vectors.

Builds random-plus-clustered unit vectors (some clusters tight enough that many pairs have CLIP
cosine >= --clip, with DINOv2 vectors that disagree inside some clusters), mines them both ways,
and prints both times, the ratio, whether the pair sets are identical, and the peak RSS growth.
Reads and writes no files.

    python scripts/bench_mine.py --n 50000
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from contextlib import contextmanager

import numpy as np

from vhmine.simsearch import PairSet, assert_same_pairs, find_pairs, pair_sims


def make_vectors(n: int, dim: int, dino_dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """80% random rows; 20% in clusters of 2-60 whose CLIP cosines run from about 0.75 to 0.98.
    DINOv2 agrees (a tight cluster of its own) in 70% of the clusters and is random in the rest."""
    rng = np.random.default_rng(seed)
    clip = rng.standard_normal((n, dim), dtype=np.float32)
    dino = rng.standard_normal((n, dino_dim), dtype=np.float32)
    start = n - n // 5
    while start < n:
        size = min(int(rng.integers(2, 61)), n - start)
        rows = slice(start, start + size)
        # rows c + s * g with c, g standard normal have cosine about 1 / (1 + s^2): s = 0.33 gives 0.9
        clip[rows] = rng.standard_normal(dim) + rng.uniform(0.15, 0.6) * rng.standard_normal((size, dim))
        if rng.random() < 0.7:
            dino[rows] = rng.standard_normal(dino_dim) + 0.4 * rng.standard_normal((size, dino_dim))
        start += size
    order = rng.permutation(n)  # clusters spread over all blocks, as in a real collection
    clip, dino = clip[order], dino[order]
    clip /= np.linalg.norm(clip, axis=1, keepdims=True)
    dino /= np.linalg.norm(dino, axis=1, keepdims=True)
    return clip, dino


def faiss_pairs(clip: np.ndarray, dino: np.ndarray, clip_min: float, dino_max: float) -> PairSet:
    """The baseline: exhaustive range search in float32, radius just below clip_min (range_search keeps
    sim > radius, and float32 sums of d products err by at most d * 2**-24), then i < j, >= clip_min
    and <= dino_max checked in float64 with the same pair_sims."""
    import faiss

    index = faiss.IndexFlatIP(clip.shape[1])
    index.add(clip)
    lims, _, found = index.range_search(clip, clip_min - 2 * clip.shape[1] * 2**-24)
    i = np.repeat(np.arange(len(clip), dtype=np.int64), np.diff(lims.astype(np.int64)))
    j = found.astype(np.int64)
    keep = i < j
    i, j = i[keep], j[keep]
    c = pair_sims(clip, i, j)
    keep = c >= clip_min
    i, j, c = i[keep], j[keep], c[keep]
    d = pair_sims(dino, i, j)
    keep = d <= dino_max
    order = np.lexsort((j[keep], i[keep]))
    return PairSet(i[keep][order], j[keep][order], c[keep][order], d[keep][order])


@contextmanager
def peak_rss(result: dict):
    """Samples /proc/self/statm every 5 ms; result['growth'] = peak RSS minus RSS at entry, in bytes."""
    page = os.sysconf("SC_PAGE_SIZE")

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * page

    start, peak, stop = rss(), [0], threading.Event()

    def sample():
        while not stop.wait(0.005):
            peak[0] = max(peak[0], rss())

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()
        result["growth"] = max(peak[0], rss()) - start


def timed(label: str, fn):
    mem: dict = {}
    with peak_rss(mem):
        t0 = time.perf_counter()
        out = fn()
        secs = time.perf_counter() - t0
    print(f"{label}: {secs:.2f} s, {len(out):,} pairs, peak RSS growth {mem['growth'] / 2**20:.0f} MiB", flush=True)
    return out, secs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=768, help="CLIP dimension")
    ap.add_argument("--dino-dim", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None, help="for find_pairs: cpu, cuda [default: cuda when present]")
    ap.add_argument("--block-size", type=int, default=None)
    ap.add_argument("--clip", type=float, default=0.9)
    ap.add_argument("--dino", type=float, default=0.55)
    ap.add_argument("--no-faiss", action="store_true", help="time find_pairs only (e.g. a memory check at large N)")
    args = ap.parse_args()

    import faiss  # noqa: F401  (imported before the clocks start: import time is not search time)
    import torch  # noqa: F401

    clip, dino = make_vectors(args.n, args.dim, args.dino_dim, args.seed)
    print(f"n={args.n:,} clip dim={args.dim} dino dim={args.dino_dim} seed={args.seed} --clip {args.clip} --dino {args.dino}")
    mine, t_mine = timed("vhmine find_pairs", lambda: find_pairs(
        clip, dino, args.clip, args.dino, device=args.device, block_size=args.block_size))
    if args.no_faiss:
        return
    base, t_base = timed("faiss IndexFlatIP.range_search", lambda: faiss_pairs(clip, dino, args.clip, args.dino))
    try:
        assert_same_pairs(mine, base)
        same = True
    except AssertionError as err:
        print(f"pair sets differ: {err}")
        same = False
    print(f"ratio: {t_base / t_mine:.2f}x (vhmine {t_mine:.2f} s vs faiss {t_base:.2f} s), pairs identical: {same}")


if __name__ == "__main__":
    main()
