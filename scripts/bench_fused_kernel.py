"""Benchmark a fused int8 products kernel (AVX512-VNNI, C) against torch._int_mm, the miner's fastest kernel here.

What issue 35's unique-pair floor leaves to the miner: `_int_mm` writes every int32 product (4 MiB a 1,024 x 1,024
piece) and the candidate search reads them back, and oneDNN packs the right operand at every call. A kernel that
multiplies and thresholds in one pass does neither. This script builds one, in C with gcc's intrinsics, and
measures it on rows shaped like the fast pass's (int8 values in [-127, 127], width 768), in one thread:

- VPDPBUSD multiplies unsigned by signed bytes, so the left rows are shifted by +128 and the shift's share,
  128 x (the sum of each right row), is subtracted at the end: exact in int32 (|sum| < 2^24);
- both operands are packed once (4-row blocks of the left rows and 64-column panels of the right ones, four
  bytes of each row side by side), a 4 x 64 tile of products is held in 16 registers, and the width is cut into
  blocks of --kc (the panel's block stays in the L1 cache; partial sums wait in a small buffer);
- at the last block each product is compared with the threshold and the pairs at or above it are listed.

It checks every product and every listed pair against `_int_mm` (and says `exact: True`), then times both in
this thread's CPU time, interleaved (--reps windows of 0.25 s each), and prints
`fused VNNI kernel vs torch._int_mm (one thread): R x` with both rates, the CPU and the load. A machine without
AVX512-VNNI or a C compiler is said in one line (exit 0). Writes only its build, in a temporary folder. Not yet
a kernel of vhmine.mine.join.kernels: this measures whether one would pay.

    python scripts/bench_fused_kernel.py
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MR, NZ = 4, 4  # the tile: 4 rows by 4 x 16 columns, 16 accumulators
NC = 16 * NZ


def source(kc: int) -> str:
    """The C kernel: fused(Ap, Bp, comp, M, N, K, thresh, hits, maxhits, out) -> number of pairs listed."""
    lines = [
        "#include <immintrin.h>",
        "#include <stdint.h>",
        f"static int32_t cbuf[4096 * {NC}] __attribute__((aligned(64)));",
        "int fused(const uint8_t* Ap, const int8_t* Bp, const int32_t* comp, int M, int N, int K, int thresh,",
        "          int32_t* hits, int maxhits, int32_t* out) {",
        "  int nh = 0; __m512i th = _mm512_set1_epi32(thresh);",
        f"  for (int n0 = 0; n0 < N; n0 += {NC}) {{",
        "    const int8_t* bp = Bp + (size_t)n0 * K;",
        f"    for (int k0 = 0; k0 < K; k0 += {kc}) {{",
        f"      int kend = (k0 + {kc} < K ? k0 + {kc} : K) / 4, last = k0 + {kc} >= K;",
        f"      for (int m0 = 0; m0 < M; m0 += {MR}) {{",
        "        const uint8_t* a = Ap + (size_t)m0 * K;",
        f"        int32_t* cb = cbuf + (size_t)m0 * {NC};",
    ]
    for r in range(MR):
        for z in range(NZ):
            lines.append(
                f"        __m512i c{r}_{z} = k0 ? _mm512_load_si512(cb + {r * NC + 16 * z}) : _mm512_setzero_si512();"
            )
    lines += [
        "        for (int k = k0 / 4; k < kend; k++) {",
        f"          const int8_t* bk = bp + k * {NC * 4}; const uint8_t* ak = a + k * {MR * 4};",
    ]
    # (the empty asm keeps each panel vector in a register: gcc would fold it into every multiply's operand)
    lines += [
        f'          __m512i b{z} = _mm512_load_si512(bk + {64 * z}); __asm__ volatile("" : "+v"(b{z}));'
        for z in range(NZ)
    ]
    for r in range(MR):
        lines.append(f"          {{ __m512i av = _mm512_set1_epi32(*(const int32_t*)(ak + {4 * r}));")
        lines += [f"            c{r}_{z} = _mm512_dpbusd_epi32(c{r}_{z}, av, b{z});" for z in range(NZ)]
        lines.append("          }")
    lines += ["        }", "        if (!last) {"]
    lines += [f"          _mm512_store_si512(cb + {r * NC + 16 * z}, c{r}_{z});" for r in range(MR) for z in range(NZ)]
    lines += ["          continue;", "        }"]
    for r in range(MR):
        for z in range(NZ):
            lines += [
                f"        {{ __m512i v = _mm512_sub_epi32(c{r}_{z}, _mm512_loadu_si512(comp + n0 + {16 * z}));",
                f"          if (out) _mm512_storeu_si512(out + (size_t)(m0 + {r}) * N + n0 + {16 * z}, v);",
                "          __mmask16 km = _mm512_cmpge_epi32_mask(v, th);",
                "          while (km && nh < maxhits) { int j = __builtin_ctz(km); km &= km - 1;",
                f"            hits[3 * nh] = m0 + {r}; hits[3 * nh + 1] = n0 + {16 * z} + j;",
                "            hits[3 * nh + 2] = _mm512_mask_reduce_max_epi32(1 << j, v); nh++; } }",
            ]
    lines += ["      }", "    }", "  }", "  return nh;", "}"]
    return "\n".join(lines) + "\n"


def build(kc: int, where: Path):
    """The compiled kernel (ctypes), or a string saying why there is none here."""
    from vhmine.config import cpu

    if not cpu(("avx512_vnni",))[1]:
        return "this CPU has no AVX512-VNNI"
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        return "no C compiler (cc or gcc) on PATH"
    src, lib = where / "fused.c", where / "fused.so"
    src.write_text(source(kc))
    res = subprocess.run(
        [cc, "-O3", "-march=native", "-shared", "-fPIC", "-o", str(lib), str(src)], capture_output=True, text=True
    )
    if res.returncode:
        return f"the kernel did not compile: {res.stderr.strip()[:300]}"
    k = ctypes.CDLL(str(lib))
    p, i = ctypes.c_void_p, ctypes.c_int
    k.fused.argtypes = [p, p, p, i, i, i, i, p, i, p]
    k.fused.restype = i
    return k


def aligned(a: np.ndarray) -> np.ndarray:
    """a's copy at a 64-byte boundary (the kernel's aligned loads)."""
    buf = np.zeros(a.nbytes + 64, np.uint8)
    off = (-buf.ctypes.data) % 64
    out = buf[off : off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1024, help="rows of each side (a multiple of 64)")
    ap.add_argument("--dim", type=int, default=768, help="the rows' width (a multiple of 4)")
    ap.add_argument("--kc", type=int, default=256, help="width of a block of the products (a multiple of 4)")
    ap.add_argument("--reps", type=int, default=8, help="timed windows of each kernel, interleaved")
    args = ap.parse_args()
    if not (64 <= args.rows <= 4096 and args.dim % 4 == 0 and args.kc % 4 == 0 and args.kc > 0):
        ap.error("--rows must lie in [64, 4096] (the partial sums' buffer holds 4,096), --dim and --kc multiples of 4")
    import torch

    torch.set_num_threads(1)
    from bench_mine import machine_line  # (the same first line as the miner's benchmark: CPU, flags, load)

    print(machine_line(), flush=True)
    with tempfile.TemporaryDirectory(prefix="vhmine-fused-") as tmp:
        kern = build(args.kc, Path(tmp))
        if isinstance(kern, str):
            print(f"fused VNNI kernel: not available here: {kern}")
            return 0
        m = n = -(-args.rows // 64) * 64
        d = args.dim
        rng = np.random.default_rng(0)
        a = rng.integers(-127, 128, (m, d)).astype(np.int8)
        b = rng.integers(-127, 128, (n, d)).astype(np.int8)
        ap_ = aligned(
            ((a.astype(np.int16) + 128).astype(np.uint8)).reshape(m // MR, MR, d // 4, 4).transpose(0, 2, 1, 3)
        )
        bp = aligned(b.reshape(n // NC, NC, d // 4, 4).transpose(0, 2, 1, 3))
        comp = np.ascontiguousarray(128 * b.astype(np.int32).sum(1), dtype=np.int32)
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        ref = torch._int_mm(ta, tb.T).numpy()
        thresh = int(np.quantile(ref, 0.9999))
        out, hits = np.zeros((m, n), np.int32), np.zeros(3 * m * n // 100 + 300, np.int32)

        def fused(keep=None):
            return kern.fused(
                ap_.ctypes.data,
                bp.ctypes.data,
                comp.ctypes.data,
                m,
                n,
                d,
                thresh,
                hits.ctypes.data,
                len(hits) // 3,
                None if keep is None else keep.ctypes.data,
            )

        nh = fused(out)
        listed = hits[: 3 * nh].reshape(-1, 3)
        want = np.argwhere(ref >= thresh)
        exact = (
            bool((out == ref).all())
            and nh == len(want)
            and bool((np.array(sorted(map(tuple, listed[:, :2]))) == want).all())
            and bool((listed[:, 2] == ref[listed[:, 0], listed[:, 1]]).all())
        )
        print(f"exact: {exact} (every product and the {nh} pairs at or above {thresh}, against torch._int_mm)")
        if not exact:
            return 1
        o = torch.empty(m, n, dtype=torch.int32)
        macs = m * n * d

        def rate(fn) -> float:
            t0, k = time.thread_time(), 0
            while time.thread_time() - t0 < 0.25:
                fn()
                k += 1
            return k * macs / (time.thread_time() - t0) / 1e9

        ours, theirs = [], []
        for _ in range(args.reps):
            theirs.append(rate(lambda: torch._int_mm(ta, tb.T, out=o)))
            ours.append(rate(fused))
        f, t = statistics.median(ours), statistics.median(theirs)
        print(
            f"fused VNNI kernel vs torch._int_mm (one thread): {f / t:.2f} x (fused {f:.0f} GMAC/s, products and "
            f"threshold, no product written; _int_mm {t:.0f} GMAC/s, products only; median of {args.reps} windows "
            f"each, {m:,} x {n:,} x {d}, --kc {args.kc}; load average {os.getloadavg()[0]:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
