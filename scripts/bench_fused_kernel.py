"""Benchmark the miner's fused int8 kernel (vhmine.mine.join.vnni: products and threshold in one pass, AVX512-VNNI
in C) against torch._int_mm, the kernel it replaced, in one thread, on one piece of the fast pass's shape (int8
values in [-127, 127], width 768, 1,024 rows a side).

It checks every product and every listed pair against `_int_mm` (and says `exact: True`), then times, in this
thread's CPU time, interleaved (--reps windows of 0.25 s each): the fused kernel on its packed operands; the
same with the right operand packed at each call (as a piece's first use in the miner); `_int_mm` alone (products
written, none searched); and `_int_mm` with the segment maxima the miner's candidate search took over its
products. It prints `fused VNNI kernel vs torch._int_mm (one thread): R x` with each rate, the CPU and the load.
A machine without AVX512-VNNI or a C compiler is said in one line (exit 0). Writes nothing but the kernel's
library, built on first use in vhmine's cache folder.

    python scripts/bench_fused_kernel.py
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1024, help="rows of each side (a multiple of 64)")
    ap.add_argument("--dim", type=int, default=768, help="the rows' width (a multiple of 8)")
    ap.add_argument("--reps", type=int, default=8, help="timed windows of each kernel, interleaved")
    args = ap.parse_args()
    if not (64 <= args.rows <= 8192 and args.rows % 64 == 0 and args.dim % 8 == 0 and args.dim > 0):
        ap.error("--rows must be a multiple of 64 in [64, 8192], --dim a multiple of 8")
    import torch

    torch.set_num_threads(1)
    from bench_mine import machine_line  # (the same first line as the miner's benchmark: CPU, flags, load)

    from vhmine.mine.join import kernels, vnni

    print(machine_line(), flush=True)
    try:
        kernels.build("vnni", "cpu")
    except kernels.Unavailable as why:
        print(f"fused VNNI kernel: not available here: {why}")
        return 0
    m = n = args.rows
    d = args.dim
    rng = np.random.default_rng(0)
    a = torch.from_numpy(rng.integers(-127, 128, (m, d)).astype(np.int8))
    b = torch.from_numpy(rng.integers(-127, 128, (n, d)).astype(np.int8))
    left, right = vnni.pack_left(a), vnni.pack(b)
    ref = torch._int_mm(a, b.T).numpy()
    thresh = int(np.quantile(ref, 0.9999))
    out = torch.empty(m, n, dtype=torch.int32)
    vnni.mm(left, right, out)
    flat, vals = vnni.search(left, right, thresh)
    want = np.flatnonzero(ref >= thresh)
    order = np.argsort(flat)
    exact = (
        bool((out.numpy() == ref).all())
        and np.array_equal(flat[order], want)
        and np.array_equal(vals[order], ref.ravel()[want])
    )
    print(f"exact: {exact} (every product and the {len(want)} pairs at or above {thresh}, against torch._int_mm)")
    if not exact:
        return 1
    o = torch.empty(m, n, dtype=torch.int32)
    maxima = torch.empty(m, n // 64, dtype=torch.int32)
    macs = m * n * d

    def rate(fn) -> float:
        t0, k = time.thread_time(), 0
        while time.thread_time() - t0 < 0.25:
            fn()
            k += 1
        return k * macs / (time.thread_time() - t0) / 1e9

    cases = {
        "fused": lambda: vnni.search(left, right, thresh),
        "fused, packing": lambda: vnni.search(left, vnni.pack(b), thresh),
        "_int_mm": lambda: torch._int_mm(a, b.T, out=o),
        "_int_mm + maxima": lambda: torch.amax(torch._int_mm(a, b.T, out=o).view(m, -1, 64), 2, out=maxima),
    }
    rates: dict = {k: [] for k in cases}
    for _ in range(args.reps):
        for k, fn in cases.items():
            rates[k].append(rate(fn))
    r = {k: statistics.median(v) for k, v in rates.items()}
    print(
        f"fused VNNI kernel vs torch._int_mm (one thread): {r['fused'] / r['_int_mm']:.2f} x (fused {r['fused']:.0f} "
        f"GMAC/s, products and threshold, no product written; {r['fused, packing']:.0f} packing the right rows at "
        f"each call; _int_mm {r['_int_mm']:.0f} GMAC/s, products only, {r['_int_mm + maxima']:.0f} with the segment "
        f"maxima; median of {args.reps} windows each, {m:,} x {n:,} x {d}; load average {os.getloadavg()[0]:.2f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
