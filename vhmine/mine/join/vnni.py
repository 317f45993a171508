"""The fused int8 products kernel ("vnni"): vnni.c, built with the machine's C compiler the first time it is
used, multiplies rows and compares each product with the fast pass's threshold in one pass, so no product is
written to memory and read back (what torch._int_mm leaves to the candidate search), and the right operand is
packed once a piece in C (oneDNN packs it at every call). AVX512-VNNI CPUs only; elsewhere, or without a
compiler, kernels.build says why in one line and the calibration chooses among the others.

Reads vnni.c; writes the compiled library to the cache folder (VHMINE_VNNI_LIB [default: vnni-<digest>.so
beside the kernel calibration's cache]), once per source and compiler flags, atomically (native.build).
"""

from __future__ import annotations

import ctypes
import functools
import threading
from dataclasses import dataclass

import numpy as np

from vhmine.config import cpu
from vhmine.mine.join.native import NotBuilt, build

LIB_ENV = "VHMINE_VNNI_LIB"
FLAGS = ("-O3", "-mavx512f", "-mavx512bw", "-mavx512vnni", "-shared", "-fPIC")  # (not -march=native: a cache
MAX_HITS = 1 << 16  # folder shared by machines keeps one library that runs on every VNNI CPU)
MB = 128  # vnni.c's rows of a block (its partial sums: 64 x MB int32)


@functools.lru_cache(maxsize=1)
def library():
    """The compiled kernel (ctypes), built here once; raises NotBuilt with the reason where it cannot be."""
    if not cpu(("avx512_vnni",))[1]:
        raise NotBuilt("this CPU has no AVX512-VNNI")
    k = build("vnni", FLAGS, LIB_ENV)
    p, i, L = ctypes.c_void_p, ctypes.c_int, ctypes.c_long
    k.vnni_pack.argtypes = [p, i, i, i, p, p]
    k.vnni_pack.restype = None
    k.vnni_pack_left.argtypes = [p, i, i, i, p]
    k.vnni_pack_left.restype = None
    k.vnni_search.argtypes = [p, i, p, p, i, i, i, p, p, L, p]
    k.vnni_search.restype = L
    return k


def _aligned(nbytes: int, dtype) -> np.ndarray:
    """An empty array at a 64-byte boundary (whole cache lines for the kernel's loads)."""
    buf = np.empty(nbytes + 64, np.uint8)
    off = (-buf.ctypes.data) % 64
    return buf[off : off + nbytes].view(dtype)


@dataclass(frozen=True, eq=False)
class Rows:
    """A left operand packed for vnni_search: rows (padded to a multiple of 4) in blocks of 4, shifted by +128;
    sliced by rows in multiples of 4, as BlockMiner.search slices its left operand."""

    data: np.ndarray  # uint8, (rows / 4, 4 k)
    n: int
    k: int

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, rows: slice) -> Rows:
        start, stop, _ = rows.indices(self.n)
        if start % 4:
            raise ValueError(f"packed rows are sliced at multiples of 4, not at {start}")
        return Rows(self.data[start // 4 : -(-stop // 4)], stop - start, self.k)


@dataclass(frozen=True, eq=False)
class Panels:
    """A right operand packed for vnni_search: n rows (padded to a multiple of 64 with zero rows) of width k."""

    data: np.ndarray  # int8, the panels
    comp: np.ndarray  # int32, 128 x each row's sum
    n: int
    k: int

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, rows: slice) -> Panels:
        """Rows start.. to the end, start a multiple of 64 (a panel's edge): a view, nothing packed again (the
        strips of BlockMiner.search where a piece reaches the diagonal)."""
        start, stop, step = rows.indices(self.n)
        if start % 64 or stop != self.n or step != 1:
            raise ValueError(f"packed panels are sliced from a multiple of 64 to the end, not [{start}:{stop}]")
        return Panels(self.data[start * self.k :], self.comp[start:], self.n - start, self.k)


def _rows(t) -> np.ndarray:
    """An int8 tensor's (or array's) rows as a C-contiguous numpy array (no copy where it is one)."""
    a = t if isinstance(t, np.ndarray) else t.numpy()
    return np.ascontiguousarray(a)


def pack(t) -> Panels:
    """The rows of t (int8, N x K) as vnni_search's right operand."""
    b = _padded(t, 64, 4)
    n64, k4 = b.shape
    data, comp = _aligned(b.size, np.int8), np.empty(n64, np.int32)
    library().vnni_pack(b.ctypes.data, k4, n64, k4, data.ctypes.data, comp.ctypes.data)
    return Panels(data, comp, len(t), k4)


def _padded(t, rows: int, cols: int) -> np.ndarray:
    """t's rows (int8) padded with zeros to multiples of `rows` rows and `cols` columns."""
    a = _rows(t)
    m, k = a.shape
    mm, kk = -(-m // rows) * rows, -(-k // cols) * cols
    return a if (mm, kk) == (m, k) else np.pad(a, ((0, mm - m), (0, kk - k)))


def pack_left(t) -> Rows:
    """The rows of t (int8, M x K) as vnni_search's left operand."""
    a = _padded(t, 4, 4)
    data = _aligned(a.size, np.uint8).reshape(len(a) // 4, 4 * a.shape[1])
    library().vnni_pack_left(a.ctypes.data, a.shape[1], len(a), a.shape[1], data.ctypes.data)
    return Rows(data, len(t), a.shape[1])


_LOCAL = threading.local()


def _buffers() -> tuple[np.ndarray, np.ndarray]:
    """This thread's partial sums (a block of MB rows) and pair list, kept from call to call (new ones would
    cost page faults), one per thread as the miner's threads call the kernel at once."""
    if getattr(_LOCAL, "hits", None) is None:
        _LOCAL.cbuf, _LOCAL.hits = np.empty(64 * MB, np.int32), np.empty(2 * MAX_HITS, np.int32)
    return _LOCAL.cbuf, _LOCAL.hits


def search(x: Rows, y: Panels, thresh: int, out=None):
    """(flat, products): the pairs of rows of x and of y whose product is at least thresh, as row * len(y) +
    column (int32, any order) and their products; out (int32 M x len(y), C-contiguous), when given, gets every
    product."""
    if x.k != y.k:
        raise ValueError(f"rows of width {x.k} against rows of width {y.k}")
    a = x.data
    rows, m, n64 = len(x), 4 * len(a), len(y.data) // y.k
    if m * n64 >= 2**31:
        raise ValueError(f"{m} x {n64} products: more than int32 numbers")
    cbuf, hits = _buffers()
    full = None if out is None else (out if out.shape == (m, n64) else np.empty((m, n64), np.int32))
    lib = library()

    def run(h):
        return lib.vnni_search(
            a.ctypes.data, m, y.data.ctypes.data, y.comp.ctypes.data, n64, y.k, int(thresh),
            cbuf.ctypes.data, h.ctypes.data, len(h) // 2, None if full is None else full.ctypes.data,
        )  # fmt: skip

    count = run(hits)
    if count > len(hits) // 2:  # more pairs than the buffer holds (rows repeated many times): once more, all
        hits = np.empty(2 * count, np.int32)
        count = run(hits)
    if full is not None and full is not out:
        out[...] = full[: out.shape[0], : out.shape[1]]
    found = hits[: 2 * count].reshape(-1, 2).copy()  # (hits is this thread's buffer, reused)
    flat, vals = found[:, 0], found[:, 1]
    if n64 != y.n or m != rows:  # padding: pairs of padded rows or columns, renumbered as len(y) wide
        r, c = np.divmod(flat, n64)
        keep = (c < y.n) & (r < rows)
        flat, vals = r[keep] * y.n + c[keep], vals[keep]
    return flat, vals


def mm(x: Rows, y: Panels, out):
    """x @ y.T into out (an int32 tensor, M x len(y)): kernels.Kernel's mm."""
    search(x, y, 2**31 - 1, out=out.numpy())
    return out
