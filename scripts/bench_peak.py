"""The instruction peak of one core, measured here by a hand loop: GMAC/s a core for int8 dot products (the
miner's int-mm kernel), bf16 and fp32 multiply-adds, and the instruction family that gives it.

A hand loop is a kernel whose MAC count is known and that is bound by the arithmetic alone: with a C compiler
(`cc`), 12 independent accumulators in registers fed by one instruction (VPDPBUSD for int8 on AVX512-VNNI or
AVX-VNNI, VDPBF16PS for bf16 on AVX512-BF16, VFMADD for fp32 on AVX-512 or AVX2+FMA), compiled once into the
cache folder; with none (CI, most users), or for an instruction the loop does not cover (AMX, int8 on AVX2),
torch on small matrices that stay in cache (torch._int_mm 512 x 768 x 512 int8, torch.mm 512 x 768 x 512
bf16 and fp32), which is a little below the instruction's peak (the library's packing and edges). One thread,
CPU time (thread_time), best of several runs. The family is named from /proc/cpuinfo's flags.

Benches state a floor as MACs / (this peak x cores used), compared in CPU time: a floor's CPU seconds are
MACs / per-core peak. Cached per machine (CPU model, flags, torch) in VHMINE_PEAK_CACHE [default:
$XDG_CACHE_HOME/vhmine/peak.json, else ~/.cache/vhmine/peak.json].

    python scripts/bench_peak.py            # the three precisions, measured now
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PRECISIONS = ("int8", "bf16", "fp32")
CACHE_ENV = "VHMINE_PEAK_CACHE"
_SCHEMA = 1
_ACC = 12  # accumulators: more than any of these instructions' latency x throughput, so the loop never waits

# (symbol, MACs an instruction, flags needed, family's name), best first for each precision
_LOOPS = {
    "int8": [
        ("dpbusd512", 64, ("avx512_vnni", "avx512f"), "avx512_vnni VPDPBUSD zmm"),
        ("dpbusd256", 32, ("avx_vnni",), "avx_vnni VPDPBUSD ymm"),
    ],
    "bf16": [("dpbf16_512", 32, ("avx512_bf16", "avx512f"), "avx512_bf16 VDPBF16PS zmm")],
    "fp32": [
        ("fma512", 16, ("avx512f",), "avx512f VFMADD231PS zmm"),
        ("fma256", 8, ("avx2", "fma"), "avx2+fma VFMADD231PS ymm"),
    ],
}

_CFLAGS = ("-O2", "-shared", "-fPIC")
_C = r"""
#include <immintrin.h>
#include <stdint.h>
#define ACC 12
/* ACC independent chains of one instruction on register operands; RET folds them so none is dead code */
#define BODY(T, ZERO, OP, SUM, RET) \
    T acc[ACC]; for (int k = 0; k < ACC; k++) acc[k] = ZERO; \
    for (long i = 0; i < iters; i++) { _Pragma("GCC unroll 12") for (int k = 0; k < ACC; k++) acc[k] = OP; } \
    for (int k = 1; k < ACC; k++) acc[0] = SUM; \
    return RET;
__attribute__((target("avx512f,avx512vnni"))) double dpbusd512(long iters, int s) {
    __m512i a = _mm512_set1_epi32(s), b = _mm512_set1_epi32(s + 1);
    BODY(__m512i, _mm512_setzero_si512(), _mm512_dpbusd_epi32(acc[k], a, b), _mm512_add_epi32(acc[0], acc[k]),
         (double)_mm512_reduce_add_epi32(acc[0]))
}
__attribute__((target("avx2,avxvnni"))) double dpbusd256(long iters, int s) {
    __m256i a = _mm256_set1_epi32(s), b = _mm256_set1_epi32(s + 1);
    BODY(__m256i, _mm256_setzero_si256(), _mm256_dpbusd_avx_epi32(acc[k], a, b), _mm256_add_epi32(acc[0], acc[k]),
         (double)_mm256_extract_epi32(acc[0], 0))
}
__attribute__((target("avx512f,avx512bf16"))) double dpbf16_512(long iters, int s) {
    __m512bh a = (__m512bh)_mm512_set1_epi32(s), b = (__m512bh)_mm512_set1_epi32(s + 1);
    BODY(__m512, _mm512_setzero_ps(), _mm512_dpbf16_ps(acc[k], a, b), _mm512_add_ps(acc[0], acc[k]),
         (double)_mm512_reduce_add_ps(acc[0]))
}
__attribute__((target("avx512f"))) double fma512(long iters, int s) {
    __m512 a = _mm512_set1_ps(1.0f + s * 1e-9f), b = _mm512_set1_ps(1e-9f);
    BODY(__m512, _mm512_setzero_ps(), _mm512_fmadd_ps(a, b, acc[k]), _mm512_add_ps(acc[0], acc[k]),
         (double)_mm512_reduce_add_ps(acc[0]))
}
__attribute__((target("avx2,fma"))) double fma256(long iters, int s) {
    __m256 a = _mm256_set1_ps(1.0f + s * 1e-9f), b = _mm256_set1_ps(1e-9f);
    BODY(__m256, _mm256_setzero_ps(), _mm256_fmadd_ps(a, b, acc[k]), _mm256_add_ps(acc[0], acc[k]),
         (double)_mm256_cvtss_f32(acc[0]))
}
"""


def cpu_flags() -> set[str]:
    """The CPU's flags from /proc/cpuinfo (none elsewhere)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.split(":")[0].strip() == "flags":
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cpu_model() -> str:
    """The CPU's model name, family and model numbers (/proc/cpuinfo; platform.processor() elsewhere)."""
    import platform

    seen: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "cpu family", "model") and key.strip() not in seen:
                    seen[key.strip()] = value.strip()
                if not line.strip() and seen:
                    break
    except OSError:
        return platform.processor() or "unknown CPU"
    return f"{seen.get('model name', '?')} (family {seen.get('cpu family', '?')}, model {seen.get('model', '?')})"


def _cache_path() -> Path:
    from vhmine.config import cache_file

    return cache_file(CACHE_ENV, "peak.json")


def _library(folder: Path):
    """The hand loops compiled into folder (once; the .c's text is the file name's key), or None without a
    compiler or where it fails: benches then fall back to torch."""
    import hashlib

    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        return None
    key = hashlib.sha256((_C + " ".join(_CFLAGS)).encode()).hexdigest()[:12]
    so = folder / f"peak-{key}.so"
    if not so.exists():
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            src, out = Path(tmp) / "peak.c", Path(tmp) / "peak.so"
            src.write_text(_C)
            r = subprocess.run([cc, *_CFLAGS, "-o", str(out), str(src)], capture_output=True)
            if r.returncode != 0:  # an old compiler without avxvnni or avx512bf16: torch, then
                return None
            shutil.move(str(out), so)  # (a move: a reader never sees half a file)
    try:
        return ctypes.CDLL(str(so))
    except OSError:
        return None


def _best_rate(run, macs_per_call: float, tries: int = 7, min_s: float = 0.03) -> float:
    """GMAC/s of run() at its best of `tries` runs of >= min_s CPU seconds each (thread_time: this thread's
    own CPU time, so a busy machine's waits do not count, and a run that was preempted is not the best)."""
    run()  # warm: the first call pages code in and wakes the core's wide units
    best = 0.0
    for _ in range(tries):
        calls, t0 = 0, time.thread_time()
        while True:
            run()
            calls += 1
            spent = time.thread_time() - t0
            if spent >= min_s:
                break
        best = max(best, calls * macs_per_call / spent / 1e9)
    return best


def _c_peak(precision: str, flags: set[str], lib) -> tuple[float, str] | None:
    iters = 200_000  # 2.4 M instructions a call: about 1 ms
    for symbol, per, need, name in _LOOPS[precision]:
        if all(f in flags for f in need):
            fn = getattr(lib, symbol, None)
            if fn is None:
                continue
            fn.restype, fn.argtypes = ctypes.c_double, [ctypes.c_long, ctypes.c_int]
            return _best_rate(lambda f=fn: f(iters, 1), iters * _ACC * per), f"{name}, a C hand loop"
    return None


def _torch_peak(precision: str, flags: set[str]) -> tuple[float, str]:
    """torch on 512 x 768 x 512 matrices (0.4-1.5 MB: in L2) in one thread."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        m, k, n = 512, 768, 512
        if precision == "int8":
            a = torch.randint(-127, 128, (m, k), dtype=torch.int8)
            b = torch.randint(-127, 128, (n, k), dtype=torch.int8).T  # (_int_mm's fast layout: b column-major)
            out = torch.empty(m, n, dtype=torch.int32)
            run = lambda: torch._int_mm(a, b, out=out)  # noqa: E731
        else:
            dt = torch.bfloat16 if precision == "bf16" else torch.float32
            a, b = torch.randn(m, k, dtype=dt), torch.randn(k, n, dtype=dt)
            out = torch.empty(m, n, dtype=dt)
            run = lambda: torch.mm(a, b, out=out)  # noqa: E731
        with torch.inference_mode():
            rate = _best_rate(run, m * k * n)
    finally:
        torch.set_num_threads(threads)
    return rate, f"{family(precision, flags)}, torch {'_int_mm' if precision == 'int8' else 'mm'} in cache"


def family(precision: str, flags: set[str] | None = None) -> str:
    """The widest instruction family this CPU offers for the precision (from its flags)."""
    flags = cpu_flags() if flags is None else flags
    order = {
        "int8": ("amx_int8", "avx512_vnni", "avx_vnni", "avx512bw", "avx2"),
        "bf16": ("amx_bf16", "avx512_bf16", "avx512f", "avx2"),
        "fp32": ("avx512f", "avx2", "sse2"),
    }[precision]
    return next((f for f in order if f in flags), "scalar")


def _identity() -> dict:
    import torch

    return {"schema": _SCHEMA, "cpu": cpu_model(), "flags": sorted(cpu_flags()), "torch": torch.__version__}


def measure(precision: str, flags: set[str] | None = None, c_loop: bool = True) -> tuple[float, str]:
    """(GMAC/s of one core, the instruction family and how measured), measured now. c_loop False: torch only.
    AMX (amx_int8, amx_bf16) is left to torch: its hand loop needs tile setup and the kernel's permission."""
    flags = cpu_flags() if flags is None else flags
    amx = {"int8": "amx_int8", "bf16": "amx_bf16"}.get(precision) in flags
    if c_loop and not amx:
        lib = _library(_cache_path().parent)
        got = lib is not None and _c_peak(precision, flags, lib)
        if got:
            return got
    return _torch_peak(precision, flags)


def peak(precision: str, cache: bool = True) -> tuple[float, str]:
    """(GMAC/s a core, name) of the instruction peak for `precision` (int8, bf16, fp32) on this machine:
    from the cache when this machine (CPU model, flags, torch) measured it before, else measured now."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision {precision!r}: one of {', '.join(PRECISIONS)}")
    path, ident = _cache_path(), _identity()
    key = json.dumps(ident, sort_keys=True)
    entries: dict = {}
    if cache:
        try:
            entries = json.loads(path.read_text())
        except (OSError, ValueError):
            entries = {}
        hit = entries.get(key, {}).get(precision)
        if isinstance(hit, list) and len(hit) == 2 and isinstance(hit[0], (int, float)) and hit[0] > 0:
            return float(hit[0]), str(hit[1])
    rate, name = measure(precision)
    if cache:
        entries.setdefault(key, {})[precision] = [rate, name]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(entries, indent=1))
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only home: measured again next time
    return rate, name


def floor_peak() -> tuple[float, str, str]:
    """(GMAC/s a core, precision, name): the fastest peak of the three. Each of int8, bf16 and fp32 computes the
    miner's quantised products exactly (mine.join.kernels), so the fastest is the floor of any products kernel."""
    rate, name, precision = max(((*peak(p), p) for p in PRECISIONS), key=lambda r: r[0])
    return rate, precision, name


def peak_line(precision: str) -> str:
    """`PRECISION peak: K GMAC/s a core (NAME, measured here)`."""
    rate, name = peak(precision)
    return f"{precision} peak: {rate:.0f} GMAC/s a core ({name}, measured here)"


def main(argv=None) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--torch", action="store_true", help="torch's in-cache products only (no C hand loop)")
    args = ap.parse_args(argv)
    flags = cpu_flags()
    keep = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16")
    print(f"CPU: {cpu_model()}, {os.cpu_count()} CPUs, flags {' '.join(f for f in keep if f in flags) or '-'}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for p in PRECISIONS:
        rate, name = measure(p, flags, c_loop=not args.torch)
        print(f"{p} peak: {rate:.0f} GMAC/s a core ({name}, measured here)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
