"""The miner's C code, built with the machine's C compiler the first time it is used: vnni.c (the fused products
kernel, vhmine.mine.join.vnni) and pairdots.c (the re-check's row products, below). Reads the C sources; writes
each compiled library to the cache folder (<name>-<digest of source and flags>.so beside the kernel calibration's
cache, or the path in the environment variable `env`), once per source and flags, atomically (a rename).

pair_dots and pair_products are recheck's arithmetic on rows read where they lie (numpy's would copy both rows
of every pair first): float32 products of pairs of rows, and the exact float64 products of their elements that
recheck.pair_sims sums. Where the library cannot be built they return None and recheck does it in numpy.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from vhmine.config import cache_file

CALIBRATION_ENV = "VHMINE_KERNEL_CACHE"  # (calibrate.CACHE_ENV: the libraries lie beside that cache)


class NotBuilt(Exception):
    """Why this machine has no such library (one line)."""


def build(name: str, flags: tuple[str, ...], env: str | None = None) -> ctypes.CDLL:
    """<name>.c (beside this module) compiled with flags, loaded; raises NotBuilt with the reason where it
    cannot be."""
    source = Path(__file__).with_name(f"{name}.c")
    src = source.read_bytes()
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    digest = hashlib.blake2b(src + " ".join(flags).encode(), digest_size=8).hexdigest()
    default = cache_file(CALIBRATION_ENV, "kernels.json").with_name(f"{name}-{digest}.so")
    lib = Path((os.environ.get(env) if env else None) or default)
    if not lib.exists():
        if cc is None:
            raise NotBuilt("no C compiler (cc or gcc) on PATH to build it")
        try:
            lib.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=lib.parent, prefix=f".{name}-") as tmp:
                part = Path(tmp) / f"{name}.so"
                res = subprocess.run([cc, *flags, "-o", str(part), str(source)], capture_output=True, text=True)
                if res.returncode:
                    last = (res.stderr.strip().splitlines() or ["?"])[-1][:200]
                    raise NotBuilt(f"{name}.c did not compile: {last}")
                os.replace(part, lib)  # (another process building the same library meanwhile: either one is whole)
        except OSError as why:  # (a cache folder that cannot be written)
            raise NotBuilt(f"{name}.c could not be built in {lib.parent.name}/: {why.strerror or why}") from None
    try:
        return ctypes.CDLL(str(lib))
    except OSError as why:  # (a cache folder mounted noexec, a library of another machine's architecture)
        raise NotBuilt(f"{lib.name} did not load: {str(why)[:200]}") from None


# (portable: -O3 and OpenMP's simd reductions vectorise its loops without -march; on x86-64 gcc it also holds
# AVX2 and AVX-512 clones of each, chosen when loaded)
PAIRDOTS_FLAGS = ("-O3", "-fopenmp-simd", "-shared", "-fPIC")


@functools.lru_cache(maxsize=1)
def pairdots():
    """pairdots.c's library, or None where it cannot be built here."""
    try:
        k = build("pairdots", PAIRDOTS_FLAGS)
    except NotBuilt:
        return None
    p, n = ctypes.c_void_p, ctypes.c_long
    for f in (k.pair_dots, k.pair_products):
        f.argtypes, f.restype = [p, n, p, p, n, p], None
    return k


def reads_in_place(x: np.ndarray) -> bool:
    """Whether pair_dots and pair_products take these rows here: the library is built and x is C-contiguous
    float32 rows (else recheck works in numpy: a copy of x for each call would cost more than it saves)."""
    return x.dtype == np.float32 and x.ndim == 2 and x.flags.c_contiguous and pairdots() is not None


def pair_dots(x: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray | None:
    """Float32 products of rows x[i] and x[j] (i, j in range), each summed in some order (within
    recheck._screen_bound of pair_sims), or None where the library is not built."""
    if not reads_in_place(x):
        return None
    i, j = np.ascontiguousarray(i, np.int64), np.ascontiguousarray(j, np.int64)  # (row numbers checked by the caller)
    out = np.empty(len(i), np.float32)
    pairdots().pair_dots(x.ctypes.data, x.shape[1], i.ctypes.data, j.ctypes.data, len(i), out.ctypes.data)
    return out


def pair_products(x: np.ndarray, i: np.ndarray, j: np.ndarray, out: np.ndarray) -> bool:
    """out[p] = float64(x[i[p]]) * x[j[p]], element by element (exact: a float32 product fits in float64), into
    out (float64, C-contiguous, len(i) x width); False (nothing written) where the library is not built."""
    if not reads_in_place(x):
        return False
    i, j = np.ascontiguousarray(i, np.int64), np.ascontiguousarray(j, np.int64)  # (row numbers checked by the caller)
    pairdots().pair_products(x.ctypes.data, x.shape[1], i.ctypes.data, j.ctypes.data, len(i), out.ctypes.data)
    return True
