"""Benchmark vhmine.mine.simsearch.find_pairs against two baselines on the same vectors and device.

Baselines: faiss IndexFlatIP + range_search, and the strongest simple one, blocked upper-triangle
float32 products (torch matmul per block, the same candidate extraction, the same exact float64
re-check: simsearch.BlockMiner with products="float32"). Data sets (--data):

- random: random-plus-clustered unit vectors (some clusters tight enough that many pairs have CLIP
  cosine >= --clip, with DINOv2 vectors that disagree inside some clusters);
- clip: the same clusters shaped like real CLIP embeddings: a few dimensions 10-30x larger than the
  rest and of one sign in every row (so unrelated images sit near cosine 0.5, as CLIP's do), then
  L2-normalised. The int8 quantisation step follows the largest component, so its margin is widest
  here unless the rows are rotated first (simsearch.fast_pass decides).

Prints, per data set, each method's time, pairs and peak RSS growth, vhmine's candidate count and
margin, the ratios, and whether all pair sets are identical. Reads and writes no files.

    python scripts/bench_mine.py --n 50000
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from contextlib import contextmanager

import numpy as np

from vhmine.mine.simsearch import (
    BlockMiner, PairSet, assert_same_pairs, fast_pass, find_pairs, merge, pair_sims, tiles,
)


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


def make_clip_like(n: int, dim: int, dino_dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """make_vectors' rows and clusters, with 4 dimensions 10-25x the others' typical size and one sign
    in every row (each row's own share of them varies by 30%, kept within clusters), then normalised:
    unrelated rows then have cosine about 0.5."""
    clip, dino = make_vectors(n, dim, dino_dim, seed)
    rng = np.random.default_rng(seed + 1)
    spikes = rng.choice(dim, 4, replace=False)
    x = clip * np.float32(np.sqrt(dim))  # entries of typical size 1
    for k, f in zip(spikes, (10, 10, 12, 25)):
        x[:, k] = np.float32(f * rng.choice([-1, 1])) * (1 + 0.3 * x[:, k])
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x, dino


def float32_pairs(clip, dino, clip_min: float, dino_max: float, device: str | None, block: int | None, stats: dict) -> PairSet:
    """The blocked float32 baseline: every block of the upper triangle as a float32 matmul, pairs kept
    at >= clip_min - 2 d 2**-24 (a float32 dot product of unit rows errs by at most d 2**-24), then
    the same float64 re-check, through the same BlockMiner as find_pairs."""
    import torch

    from vhmine.embed.encoders import resolve_device

    dev = resolve_device(device)
    n, d = clip.shape
    block = min(-(-(block or (16384 if dev.type == "cuda" else 8192)) // 64) * 64, -(-n // 64) * 64)
    rows = np.zeros((-(-n // 64) * 64, d), np.float32)
    rows[:n] = clip
    x = torch.from_numpy(rows).to(dev)
    miner = BlockMiner(clip, dino, clip_min, dino_max, clip_min - 2 * d * 2**-24, n, device=dev, block=block,
                       width=d, products="float32")
    found, total = [], 0
    with torch.inference_mode():
        for r, c in tiles(len(rows), block):
            i, j = miner.candidates(x[r:r + block], x[c:c + block], r, c)
            total += len(i)
            found.append(miner.recheck(i, j))
    stats["candidates"] = total
    return merge(found)


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


def run(name: str, clip, dino, args) -> dict:
    print(f"\n== {name}: n={len(clip):,} clip dim={clip.shape[1]} dino dim={dino.shape[1]} seed={args.seed} "
          f"--clip {args.clip} --dino {args.dino}", flush=True)
    st: dict = {}
    mine, t_mine = timed("vhmine find_pairs", lambda: find_pairs(
        clip, dino, args.clip, args.dino, device=args.device, block_size=args.block_size, stats=st))
    other = fast_pass(clip, args.clip, rotate=not st["rotated"])  # what the other choice would give (untimed)
    print(f"  fast pass: {st['candidates']:,} candidates, margin {st['margin']:.4f}, rotated: {st['rotated']} "
          f"(margin {'without' if st['rotated'] else 'with'} rotation: {other.margin:.4f})")
    out = {"data": name, "vhmine_s": t_mine, **st}
    if args.no_baselines:
        return out
    fst: dict = {}
    f32, t_f32 = timed("blocked float32 products", lambda: float32_pairs(
        clip, dino, args.clip, args.dino, args.device, args.block_size, fst))
    print(f"  float32 pass: {fst['candidates']:,} candidates, margin {2 * clip.shape[1] * 2**-24:.6f}")
    base, t_base = timed("faiss IndexFlatIP.range_search", lambda: faiss_pairs(clip, dino, args.clip, args.dino))
    same = True
    for label, other in (("blocked float32", f32), ("faiss", base)):
        try:
            assert_same_pairs(mine, other)
        except AssertionError as err:
            print(f"pair sets differ (vhmine vs {label}): {err}")
            same = False
    print(f"ratio vs faiss: {t_base / t_mine:.2f}x, vs blocked float32: {t_f32 / t_mine:.2f}x "
          f"(vhmine {t_mine:.2f} s, float32 {t_f32:.2f} s, faiss {t_base:.2f} s), pairs identical: {same}", flush=True)
    return {**out, "float32_s": t_f32, "faiss_s": t_base, "identical": same}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=50_000)
    ap.add_argument("--dim", type=int, default=768, help="CLIP dimension")
    ap.add_argument("--dino-dim", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", choices=["random", "clip", "both"], default="both")
    ap.add_argument("--device", default=None, help="cpu, cuda [default: cuda when present]")
    ap.add_argument("--block-size", type=int, default=None)
    ap.add_argument("--clip", type=float, default=0.9)
    ap.add_argument("--dino", type=float, default=0.55)
    ap.add_argument("--no-baselines", "--no-faiss", action="store_true",
                    help="time find_pairs only (e.g. a memory check at large N)")
    args = ap.parse_args()

    import faiss  # noqa: F401  (imported before the clocks start: import time is not search time)
    import torch  # noqa: F401

    makers = {"random": make_vectors, "clip": make_clip_like}
    for name in (["random", "clip"] if args.data == "both" else [args.data]):
        run(name, *makers[name](args.n, args.dim, args.dino_dim, args.seed), args)


if __name__ == "__main__":
    main()
