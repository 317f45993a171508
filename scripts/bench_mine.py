"""Benchmark vhmine.mine.join.simsearch.find_pairs against two baselines on the same vectors and device.

Baselines: faiss IndexFlatIP + range_search, and the strongest simple one, blocked upper-triangle
float32 products (torch matmul per block, the same candidate extraction, the same exact float64
re-check: products.BlockMiner with products="float32"). Data sets (--data):

- random: random-plus-clustered unit vectors (some clusters tight enough that many pairs have CLIP
  cosine >= --clip, with DINOv2 vectors that disagree inside some clusters);
- clip: the same clusters shaped like real CLIP embeddings: a few dimensions 10-30x larger than the
  rest and of one sign in every row (so unrelated images sit near cosine 0.5, as CLIP's do), then
  L2-normalised. The int8 quantisation step follows the largest component, so its margin is widest
  here unless the rows are rotated first (quantise.fast_pass decides).

First the machine (the CPU's model, cores and flags, the load) and the products kernels' rates (mine.join.kernels:
each candidate measured here in one thread, as find_pairs chooses among them). Also timed: the floor, the
blocked products alone with the fastest kernel (the one find_pairs uses; --kernel: that one) over the same
upper-triangle blocks, same device and block size, on the same already-quantised rows, into one reused
buffer, in the library's own threads; no candidate extraction, no re-check), right before and after each
run of vhmine's miner (the median of those is the floor: the load of a shared machine drifts). And the
unique-pair floor: n (n - 1) / 2 x d MACs at the instruction peak of one core measured here by a hand loop
(scripts/bench_peak.py: the fastest of int8, bf16 and fp32, each of which computes the quantised products
exactly), i.e. MACs / peak CPU seconds on however many cores, against the miner's median CPU time (every
thread of the process): `vs unique-pair floor (KERNEL, CPU time): R x`, the miner's whole overhead
(quantisation, candidate search, re-check, its threads, the kernel's distance from the peak) over the
products it cannot avoid. The line names the miner's threads (--workers; default one a core): two cores that
share caches and memory each run the same work a few per cent slower than one alone, and --workers 1 shows
the miner without that. On a GPU the unique-pair floor is the kernel's best rate there (calibrate.best_rate,
before and after each run), in wall time.

Every ratio is CPU time over CPU time measured in the same run (scripts/bench_timing.py: on a shared machine
the load stretches wall time, not CPU time), with the wall-time ratio beside it for information; on a GPU
(--device cuda) the ratios are in wall time, the device's time.

Prints, per data set, each method's time (and the miner's CPU time), pairs and peak RSS growth, vhmine's
candidate count and margin, the ratios, and whether all pair sets are identical. Reads and writes no files
(but the kernel calibration's cache, mine.join.kernels, and the peak's, bench_peak).

--end-to-end times the real `vhmine mine` command on an on-disk index of --n CLIP-shaped rows against its join
alone (import, open the index, find_pairs, and exit as the command line does: gc.freeze at exit), each in a fresh
process, in CPU time (scripts/bench_mine_e2e.py), and prints only that (and, beside it, the ratio against the
join exiting as a plain script).

--incremental N, --against N and --pruning add the lines of scripts/bench_mine_lines.py (growth by 1% new
rows in wall and CPU time, two collections across, and the pruning's shares at --clip 0.9 and 0.95); each says
whether its pairs are identical (bit for bit), and the script exits 1 where they are not.

    python scripts/bench_mine.py --n 50000
    python scripts/bench_mine.py --only-growth --incremental 200000 --against 100000
    python scripts/bench_mine.py --only-growth --pruning --n 50000
    python scripts/bench_mine.py --end-to-end --n 50000 --repeat 7
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from contextlib import contextmanager

import numpy as np

from vhmine.config import resolve_device
from vhmine.mine.join import (
    PairSet,
    assert_same_pairs,
    calibrate,
    find_pairs,
    kernels,
    merge,
    pair_sims,
)
from vhmine.mine.join.products import BlockMiner, tiles
from vhmine.mine.join.quantise import choose_turn, fast_pass, sample_rows
from vhmine.mine.join.search import block_rows

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # (its sibling modules, when imported from elsewhere)
from bench_peak import floor_peak  # noqa: E402
from bench_timing import clock  # noqa: E402


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


def float32_pairs(
    clip, dino, clip_min: float, dino_max: float, device: str | None, block: int | None, stats: dict
) -> PairSet:
    """The blocked float32 baseline: every block of the upper triangle as a float32 matmul, pairs kept
    at >= clip_min - 2 d 2**-24 (a float32 dot product of unit rows errs by at most d 2**-24), then
    the same float64 re-check, through the same BlockMiner as find_pairs."""
    import torch

    dev = resolve_device(device)
    n, d = clip.shape
    block = min(-(-(block or (16384 if dev.type == "cuda" else 8192)) // 64) * 64, -(-n // 64) * 64)
    rows = np.zeros((-(-n // 64) * 64, d), np.float32)
    rows[:n] = clip
    x = torch.from_numpy(rows).to(dev)
    miner = BlockMiner(
        clip,
        dino,
        clip_min,
        dino_max,
        clip_min - 2 * d * 2**-24,
        n,
        device=dev,
        block=block,
        width=d,
        products="float32",
    )
    found, total = [], 0
    with torch.inference_mode():
        for r, c in tiles(len(rows), block):
            i, j = miner.candidates(x[r : r + block], x[c : c + block], r, c)
            total += len(i)
            found.append(miner.recheck(i, j))
    stats["candidates"] = total
    return merge(found)


def kernel_floor(clip, clip_min: float, rotated: bool, device: str | None, block_size: int | None, kernel: str | None):
    """(the kernel, a function that times the floor): find_pairs' blocks (block size, upper
    triangle, device) as the products of the kernel find_pairs chooses (or `kernel`) on the rows
    fast_pass quantised for it (as the miner did, quantised here untimed), into one reused buffer, and
    nothing else, in the library's own threads. The function returns (CPU seconds of this process, every
    thread; wall seconds): on a GPU the wall time is the measure, on a CPU the CPU time. (On a CPU the miner
    computes the same blocks in pieces, and skips the pieces of a diagonal block that hold only pairs
    below the diagonal: at N = 50,000 and 8192-row blocks it computes 90% of the floor's products.)"""
    import torch

    dev = resolve_device(device)
    k = calibrate.choose(dev, -(-clip.shape[1] // 8) * 8, kernel=kernel).kernel
    fp = fast_pass(clip, clip_min, rotate=rotated, qmax=k.levels(clip.shape[1]))
    q = torch.from_numpy(fp.q).to(dev)
    block = min(block_rows(block_size, dev.type), len(q))
    buf = torch.empty(block * block, dtype=getattr(torch, k.out), device=dev)
    blocks = tiles(len(q), block)

    def one(rc) -> None:
        x, y = q[rc[0] : rc[0] + block], q[rc[1] : rc[1] + block]
        calibrate.products(k, k.left(x), k.right(y), buf[: len(x) * len(y)].view(len(x), len(y)))

    def run() -> tuple[float, float]:
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        with clock() as c, torch.inference_mode():
            for rc in blocks:
                one(rc)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
        return c.cpu_s, c.wall_s

    # the blocks' MACs (the floor line sets them against the instruction peak)
    run.macs = sum(min(block, len(q) - r) * min(block, len(q) - c) for r, c in blocks) * q.shape[1]
    return k, run


def kernel_rates(device: str | None, width: int) -> str:
    """The candidates' rates, measured now (not from the cache) as find_pairs' calibration does."""
    dev = resolve_device(device)
    rates = calibrate.calibrate(kernels.available(dev), dev, width)
    return ", ".join(f"{k} {v:.1f}" if v is not None else f"{k} not exact" for k, v in rates.items())


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


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in /proc/self/status")


@contextmanager
def peak_rss(result: dict):
    """result['growth'] = peak RSS minus RSS at entry, in bytes: the kernel's own peak (VmHWM), reset at
    entry through /proc/self/clear_refs, so nothing runs beside the timed code (a thread sampling RSS
    every few ms took 3% of the miner's time). Where the reset is refused, samples every 5 ms instead."""
    start = _rss_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        sampled = False
    except OSError:
        sampled = True
    peak, stop = [0], threading.Event()

    def sample():
        while not stop.wait(0.005):
            peak[0] = max(peak[0], _rss_kib("VmRSS"))

    t = threading.Thread(target=sample, daemon=True)
    if sampled:
        t.start()
    try:
        yield
    finally:
        stop.set()
        if sampled:
            t.join()
        top = max(peak[0], _rss_kib("VmRSS")) if sampled else _rss_kib("VmHWM")
        result["growth"] = max(0, top - start) * 1024


_SETTLE_S = 0.3


def timed(label: str, fn, cpu: list | None = None):
    """fn's result and wall seconds; cpu, when given, gets its CPU seconds (every thread of this process)."""
    # Idle pools first: numpy's BLAS threads and torch's OpenMP team spin for up to about 0.1 s after their last
    # call (the floor's products, the quantisation above), and that CPU time would count against fn (0.04 to
    # 0.1 CPU-s of a 2.6 CPU-s mine at N = 50,000, measured here)
    time.sleep(_SETTLE_S)
    mem: dict = {}
    with peak_rss(mem):
        with clock() as c:
            out = fn()
        secs, used = c.wall_s, c.cpu_s
    grew = mem["growth"] / 2**20
    print(f"{label}: {secs:.2f} s ({used:.2f} CPU-s), {len(out):,} pairs, peak RSS growth {grew:.0f} MiB", flush=True)
    if cpu is not None:
        cpu.append(used)
    return out, secs


def machine_line() -> str:
    """The CPU's model, cores and the instruction sets the products kernels care about, and the load."""
    from vhmine.mine.join.calibrate import machine

    m = machine("cpu")
    return f"CPU: {m['cpu']}, {m['cores']} cores, flags {' '.join(m['flags']) or '-'}; load average " + (
        " ".join(f"{x:.2f}" for x in os.getloadavg())
    )


def unique_floor_line(
    kernel, device, n: int, d: int, rates: list, cpu: list, walls: list, workers: int | None = None
) -> tuple[str, float]:
    """`vs unique-pair floor (KERNEL, CPU time): R x`: the miner's median CPU seconds over the unique pairs'
    products (n (n - 1) / 2 x d MACs) at the instruction peak of one core measured here by a hand loop
    (bench_peak.floor_peak): MACs / peak is the floor's CPU seconds, on one core or spread over many. On a GPU
    (rates: the kernel's best rates there, calibrate.best_rate) the miner's median wall time over the MACs at
    the best of them. workers: the miner's threads (find_pairs' workers; None: its default, torch's thread
    count)."""
    import torch

    macs = n * (n - 1) / 2 * d
    threads = workers or torch.get_num_threads()
    load = f"load average {os.getloadavg()[0]:.2f}"
    if str(device).startswith("cuda"):
        rate = max(rates)
        floor, used = macs / rate / 1e9, statistics.median(walls)
        return (
            f"vs unique-pair floor ({kernel.name}, GPU wall time): {used / floor:.2f} x (vhmine {used:.2f} s, median "
            f"of {len(walls)}; {macs / 1e9:,.0f} GMAC at {rate:.0f} GMAC/s, the kernel's best on the device of "
            f"{len(rates)} measures: {floor:.2f} s; {load})"
        ), used / floor
    rate, precision, name = floor_peak()
    floor, used, wall = macs / rate / 1e9, statistics.median(cpu), statistics.median(walls)
    return (
        f"vs unique-pair floor ({kernel.name}, CPU time): {used / floor:.2f} x (vhmine {used:.2f} CPU-s in {threads} "
        f"thread{'s' * (threads > 1)}, median of {len(cpu)}; {macs / 1e9:,.0f} GMAC at {rate:.0f} GMAC/s a core, "
        f"the {precision} peak ({name}, measured here): {floor:.2f} CPU-s; wall time "
        f"{wall / (floor / threads):.2f} x against it on {threads} core{'s' * (threads > 1)}; {load})"
    ), used / floor


def run(name: str, clip, dino, args) -> dict:
    print(
        f"\n== {name}: n={len(clip):,} clip dim={clip.shape[1]} dino dim={dino.shape[1]} seed={args.seed} "
        f"--clip {args.clip} --dino {args.dino}",
        flush=True,
    )
    st: dict = {}
    print(
        "products kernels, GMAC/s in one thread, measured now:"
        f" {kernel_rates(args.device, -(-clip.shape[1] // 8) * 8)}",
        flush=True,
    )
    turned = bool(choose_turn(clip[sample_rows(len(clip))]))  # find_pairs' choice, without quantising twice
    kern, floor = kernel_floor(clip, args.clip, turned, args.device, args.block_size, args.kernel)
    kname, dev = kern.name, resolve_device(args.device)
    gpu = dev.type == "cuda"
    # on a GPU the kernel's best rate there is the unique-pair floor (no hand loop for it here): measured
    # like the floor, around each run
    rate = (lambda: [calibrate.best_rate(kern, dev, clip.shape[1])]) if gpu else list
    floor()  # warm: the miner below runs on a warm kernel too (its first block is no warmer than this)
    floors, mines, cpus, rates = [floor()], [], [], rate()
    for _ in range(args.repeat):  # the floor right before and after each run of the miner
        mine, t = timed(
            "vhmine find_pairs",
            lambda: find_pairs(
                clip,
                dino,
                args.clip,
                args.dino,
                device=args.device,
                block_size=args.block_size,
                stats=st,
                kernel=args.kernel,
                workers=args.workers,
            ),
            cpus,
        )
        mines.append(t)
        floors.append(floor())
        rates += rate()
    unique_line, unique_ratio = unique_floor_line(kern, dev, len(clip), clip.shape[1], rates, cpus, mines, args.workers)
    t_mine, t_floor = statistics.median(mines), statistics.median(w for _, w in floors)
    c_mine, c_floor = statistics.median(cpus), statistics.median(c for c, _ in floors)
    # the ratios' measure: CPU time on a CPU (the load stretches wall time), the device's wall time on a GPU
    m_mine, m_floor = (t_mine, t_floor) if gpu else (c_mine, c_floor)
    print(f"  {st['kernel_line']}")
    peak_rate, peak_precision, _ = (None, None, None) if gpu else floor_peak()
    at_peak = (  # how near the kernel alone comes to the instruction peak, in CPU time
        ""
        if gpu
        else f"; {floor.macs / 1e9:,.0f} GMAC, {floor.macs / c_floor / 1e9:.0f} GMAC per CPU-s: "
        f"{100 * floor.macs / c_floor / 1e9 / peak_rate:.0f}% of the {peak_precision} peak"
    )
    print(
        f"floor (the same blocks' products alone, kernel {kname}): {c_floor:.2f} CPU-s (median of "
        f"{', '.join(f'{c:.2f}' for c, _ in floors)} CPU-s; wall {t_floor:.2f} s{at_peak}; load average "
        f"{os.getloadavg()[0]:.2f})",
        flush=True,
    )
    other = fast_pass(clip, args.clip, rotate=not st["rotated"])  # what the other choice would give (untimed)
    print(
        f"  fast pass: {st['candidates']:,} candidates, margin {st['margin']:.4f}, rotated: {st['rotated']} "
        f"(margin {'without' if st['rotated'] else 'with'} rotation: {other.margin:.4f})"
    )
    out = {
        "data": name,
        "vhmine_s": t_mine,
        "vhmine_cpu_s": c_mine,
        "floor_s": t_floor,
        "floor_cpu_s": c_floor,
        "floor_kernel": kname,
        "unique": unique_ratio,
        **st,
    }
    clock_name = "GPU wall time" if gpu else f"CPU time; wall time {t_mine / t_floor:.2f} x"
    if args.no_baselines:
        print(
            f"ratio (vhmine {t_mine:.2f} s, {c_mine:.2f} CPU-s; floor {t_floor:.2f} s, {c_floor:.2f} CPU-s; "
            f"{clock_name}), vs floor: {m_mine / m_floor:.2f} x",
            flush=True,
        )
        print(unique_line, flush=True)
        return out
    fst: dict = {}
    c_f32: list = []
    f32, t_f32 = timed(
        "blocked float32 products",
        lambda: float32_pairs(clip, dino, args.clip, args.dino, args.device, args.block_size, fst),
        c_f32,
    )
    print(f"  float32 pass: {fst['candidates']:,} candidates, margin {2 * clip.shape[1] * 2**-24:.6f}")
    c_base: list = []
    base, t_base = timed(
        "faiss IndexFlatIP.range_search", lambda: faiss_pairs(clip, dino, args.clip, args.dino), c_base
    )
    m_f32, m_base = (t_f32, t_base) if gpu else (c_f32[0], c_base[0])
    same = True
    for label, other in (("blocked float32", f32), ("faiss", base)):
        try:
            assert_same_pairs(mine, other)
        except AssertionError as err:
            print(f"pair sets differ (vhmine vs {label}): {err}")
            same = False
    walls = (  # beside the CPU-time ratios, for information
        f"; wall time: vs faiss {t_base / t_mine:.2f}x, vs blocked float32 {t_f32 / t_mine:.2f}x, "
        f"vs floor {t_mine / t_floor:.2f} x"
    )
    print(
        f"ratio vs faiss: {m_base / m_mine:.2f}x, vs blocked float32: {m_f32 / m_mine:.2f}x "
        f"({'GPU wall time' if gpu else 'CPU time'}: vhmine {t_mine:.2f} s, {c_mine:.2f} CPU-s; float32 "
        f"{t_f32:.2f} s, {c_f32[0]:.2f} CPU-s; faiss {t_base:.2f} s, {c_base[0]:.2f} CPU-s; floor {t_floor:.2f} s, "
        f"{c_floor:.2f} CPU-s{'' if gpu else walls}), pairs identical: {same}, "
        f"vs floor ({kname}): {m_mine / m_floor:.2f} x",
        flush=True,
    )
    print(unique_line, flush=True)
    return {
        **out,
        "float32_s": t_f32,
        "float32_cpu_s": c_f32[0],
        "faiss_s": t_base,
        "faiss_cpu_s": c_base[0],
        "identical": same,
    }


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
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="find_pairs' threads (1: the products and the checks in one thread) [default: torch's, one a core]",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run vhmine's miner this many times (its median time against the floors' median)",
    )
    ap.add_argument(
        "--no-baselines",
        "--no-faiss",
        action="store_true",
        help="time find_pairs and the floor only (e.g. a memory check at large N)",
    )
    ap.add_argument(
        "--kernel",
        default=None,
        help=(
            "products kernel for find_pairs and the floor "
            f"({', '.join(kernels.KERNELS)}) [default: the fastest measured here]"
        ),
    )
    ap.add_argument(
        "--incremental",
        type=int,
        default=0,
        metavar="N",
        help="also time mining 1%% new rows of N CLIP-shaped rows against a full mine of all N [default: off]",
    )
    ap.add_argument(
        "--against",
        type=int,
        default=0,
        metavar="N",
        help="also time N x N rows across two collections against the same 2N rows as one triangle [default: off]",
    )
    ap.add_argument("--only-growth", action="store_true", help="run only the --incremental and --against lines")
    ap.add_argument(
        "--pruning",
        action="store_true",
        help="also the pruning lines: --clip 0.9 and 0.95 on CLIP-shaped rows and on families, N=--n [default: off]",
    )
    ap.add_argument("--pruning-ray", action="store_true", help="with --pruning: the Ray engine's too (a local cluster)")
    ap.add_argument(
        "--end-to-end",
        action="store_true",
        help="only time `vhmine mine --full` on an on-disk index of --n rows against its join alone (CPU time)",
    )
    args = ap.parse_args()
    if args.end_to_end:  # child processes only: nothing of faiss or torch is loaded here
        from bench_mine_e2e import end_to_end_line

        end_to_end_line(args)
        return

    import faiss  # noqa: F401  (imported before the clocks start: import time is not search time)
    import torch

    if args.workers:  # (find_pairs with 1 worker computes in torch's own threads: one, then)
        torch.set_num_threads(args.workers)

    print(machine_line(), flush=True)
    from bench_mine_lines import growth_lines, pruning_lines

    makers = {"random": make_vectors, "clip": make_clip_like}
    for name in (["random", "clip"] if args.data == "both" else [args.data]) * (not args.only_growth):
        run(name, *makers[name](args.n, args.dim, args.dino_dim, args.seed), args)
    same = growth_lines(args, make_clip_like)
    if args.pruning:
        same &= pruning_lines(args, make_clip_like, ray=args.pruning_ray)
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
