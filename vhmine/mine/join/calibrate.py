"""The choice of the products kernel (vhmine.mine.join.kernels) by measurement on the machine that runs the
blocks: each exact candidate timed on a small block in one thread (`calibrate`), the fastest chosen
(`choose`). Reads and writes one small JSON, the calibration cache (VHMINE_KERNEL_CACHE [default:
$XDG_CACHE_HOME/vhmine/kernels.json, else ~/.cache/vhmine/kernels.json]), keyed by the machine: CPU
model, cores, the instruction sets that matter, the GPU's name, torch's and numpy's versions, the
width of the rows; a change of any of them measures again.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vhmine.config import cache_file, cpu
from vhmine.errors import InputError
from vhmine.files import entry_key, read_entries, write_entries
from vhmine.mine.join.kernels import Kernel, Unavailable, available, build, exact
from vhmine.mine.join.rowcheck import blas_threads

CACHE_ENV = "VHMINE_KERNEL_CACHE"
_SCHEMA = 2  # raise when what is measured changes: old cache entries are then measured again
_CAL_ROWS, _CAL_COLS = 256, 512  # the calibration block (with the width of the rows): 0.1 GMAC at d = 768
_GPU_SCALE = 16  # a GPU's block is this much larger a side: at 256 x 512 it would time its kernel launches
_BUDGET = 0.04  # seconds a candidate's timing may take, about


def rate(kernel: Kernel, device, d: int, budget: float = _BUDGET) -> float:
    """GMAC/s of the kernel on a _CAL_ROWS x d x _CAL_COLS block (on a GPU _GPU_SCALE times larger a
    side; a slow kernel on a quarter of it, so one candidate never takes much over `budget`), operands
    converted beforehand, as in a block, and what the miner's candidate search needs of it (`products`: the
    segment maxima)."""
    import torch

    cpu = torch.device(device).type == "cpu"
    rows, cols = (_CAL_ROWS, _CAL_COLS) if cpu else (_CAL_ROWS * _GPU_SCALE, _CAL_COLS * _GPU_SCALE)
    lv = kernel.levels(d)
    rng = np.random.default_rng(1)
    a = torch.from_numpy(rng.integers(-lv, lv + 1, (rows, d)).astype(np.int8)).to(device)
    b = torch.from_numpy(rng.integers(-lv, lv + 1, (cols, d)).astype(np.int8)).to(device)
    out = torch.empty(rows * cols, dtype=getattr(torch, kernel.out), device=device)
    maxima = torch.empty(rows * cols // 64, dtype=out.dtype, device=device)

    def once(m: int, n: int) -> float:
        x, y = kernel.left(a[:m]), kernel.right(b[:n])
        _sync(torch, device)
        w0, t0 = time.perf_counter(), time.thread_time()
        products(kernel, x, y, out[: m * n].view(m, n), maxima[: m * n // 64].view(m, -1))
        _sync(torch, device)
        wall, own = time.perf_counter() - w0, time.thread_time() - t0
        # On a CPU this thread's own CPU time, which a busy machine's other processes (and the spinning
        # pools of other libraries in this one) do not inflate: every candidate runs in the calling
        # thread here (torch and numpy's OpenBLAS told to use one; see calibrate). On a GPU wall time.
        return max(own if cpu else wall, 1e-9)

    m, n = rows // 4, cols // 4
    once(m, n)  # warm: a library's first call may start its threads or pack its code
    if once(m, n) * 16 < budget / 3:  # fast: the whole block
        m, n = rows, cols
    t, spent = math.inf, 0.0
    for _ in range(5):  # the best of a few, within the budget
        t1 = once(m, n)
        t, spent = min(t, t1), spent + t1
        if spent > budget:
            break
    return m * n * d / t / 1e9


def best_rate(kernel: Kernel, device, d: int, seconds: float = 0.6, window: float = 0.05) -> float:
    """The kernel's best sustained rate in GMAC/s: on a CPU in one thread (this thread's CPU time), on a GPU
    in wall time, as the miner computes them (`products`). Products of random rows at its levels (1024 x d by
    1024 rows, a CPU's piece, and 2048 by 2048; on a GPU 8192 and 16384 a side) back to back for `window`
    seconds at a time, for about `seconds`; the best window's rate. What scripts/bench_mine.py divides the
    unique pairs' products (n (n - 1) / 2 x d MACs) by for the miner's floor in CPU time."""
    import torch

    cpu = torch.device(device).type == "cpu"
    threads = torch.get_num_threads()
    if cpu:
        torch.set_num_threads(1)
    try:
        lv, rng, best = kernel.levels(d), np.random.default_rng(2), 0.0
        ops = []
        for side in (1024, 2048) if cpu else (8192, 16384):
            a = torch.from_numpy(rng.integers(-lv, lv + 1, (side, d)).astype(np.int8)).to(device)
            b = torch.from_numpy(rng.integers(-lv, lv + 1, (side, d)).astype(np.int8)).to(device)
            out = torch.empty(side, side, dtype=getattr(torch, kernel.out), device=device)
            ops.append((side, kernel.left(a), kernel.right(b), out))
        for _, x, y, out in ops:  # warm
            products(kernel, x, y, out)
        t_end = time.perf_counter() + seconds
        while time.perf_counter() < t_end:
            for side, x, y, out in ops:
                macs, spent = 0, 0.0
                _sync(torch, device)
                w0, t0 = time.perf_counter(), time.thread_time()
                while spent < window:
                    products(kernel, x, y, out)
                    macs += side * side * d
                    if not cpu:
                        _sync(torch, device)
                    spent = (time.thread_time() - t0) if cpu else (time.perf_counter() - w0)
                best = max(best, macs / spent / 1e9)
        return best
    finally:
        torch.set_num_threads(threads)


def products(kernel: Kernel, x, y, out, maxima=None) -> None:
    """The kernel's products of converted rows x and y as the miner uses them: into out, and with maxima (a
    tensor of out's rows by its columns / 64) also their segment maxima, the first look of the miner's
    candidate search (BlockMiner._piece): so the calibration compares kernels by what each costs the miner."""
    prod = kernel.mm(x, y, out)
    if maxima is not None:
        import torch

        torch.amax(prod.view(len(prod), -1, 64), 2, out=maxima)


def _sync(torch, device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def cache_path() -> Path:
    return cache_file(CACHE_ENV, "kernels.json")


def machine(device) -> dict:
    """What the measured rates depend on: the CPU (model, cores, instruction sets), the GPU, the libraries."""
    import torch

    dev = torch.device(device)
    model, flags = cpu(
        ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")
    )
    m = {
        "schema": _SCHEMA,
        "device": dev.type,
        "cpu": model,
        "cores": os.cpu_count(),
        "flags": flags,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "isa": torch.backends.cpu.get_cpu_capability(),
    }
    if dev.type == "cuda":
        m["gpu"] = torch.cuda.get_device_name(dev)
    return m


@dataclass(frozen=True)
class Choice:
    """The kernel chosen for a device and width, and the candidates' measured rates (GMAC/s in one
    thread; None: not offered, or not exact, here). source: "measured", "cached" or "forced"."""

    kernel: Kernel
    rates: dict = field(default_factory=dict)
    source: str = "measured"

    @property
    def name(self) -> str:
        return self.kernel.name

    def record(self) -> dict:
        """What run.json keeps: the kernel, how it was chosen, the rates (no machine path or name)."""
        return {
            "name": self.name,
            "chosen": self.source,
            "gmac_per_s": {k: (round(v, 2) if v is not None else None) for k, v in self.rates.items()},
        }

    def line(self) -> str:
        shown = ", ".join(f"{k} {v:.1f}" for k, v in self.rates.items() if v is not None)
        how = "forced by --kernel" if self.source == "forced" else f"fastest {self.source} here"
        return f"products kernel: {self.name} ({how}" + (f"; GMAC/s in one thread: {shown})" if shown else ")")


def calibrate(candidates: dict, device, d: int) -> dict:
    """{name: GMAC/s, or None where not exact} of each candidate Kernel, in one torch thread on a CPU
    (find_pairs' threads each run torch single-threaded)."""
    import torch

    threads = torch.get_num_threads()
    if torch.device(device).type == "cpu":
        torch.set_num_threads(1)
    try:
        with blas_threads(1):
            return {name: (rate(k, device, d) if exact(k, device, d) else None) for name, k in candidates.items()}
    finally:
        torch.set_num_threads(threads)


def _valid_rates(rates, cands: dict) -> bool:
    """Whether a cache entry's rates are what calibrate writes: a rate (a finite number above 0) or None for
    each candidate. Anything else (a string, a list, a dict, NaN: a file edited by hand or by another
    program) is measured again, as an unreadable file is."""
    import math

    def rate_ok(v) -> bool:
        return v is None or (type(v) in (int, float) and math.isfinite(v) and v > 0)

    return isinstance(rates, dict) and set(rates) == set(cands) and all(rate_ok(v) for v in rates.values())


def _fastest(cands: dict, rates: dict, d: int, min_levels: int) -> str | None:
    usable = [n for n in cands if rates.get(n) is not None and cands[n].levels(d) >= min_levels]
    return max(usable, key=lambda n: rates[n]) if usable else None


_CHOSEN: dict = {}  # (device, width, kernel, min_levels, cache) -> Choice: one calibration a process


def choose(
    device,
    d: int,
    *,
    kernel: str | None = None,
    min_levels: int = 0,
    cache: Path | None = None,
    candidates: dict | None = None,
    identity: dict | None = None,
) -> Choice:
    """The products kernel for rows of width d on this device: `kernel` when named (InputError where it
    is not offered or not exact here), else the fastest exact candidate whose levels are at least
    min_levels (rows quantised elsewhere to that many levels), by the rates cached for this machine
    (`machine`, or `identity` in its place) or measured now and cached. candidates: {name: Kernel}
    [default: `available`]."""
    import torch

    dev = torch.device(device)
    if kernel not in (None, "auto"):
        try:
            k = build(kernel, dev)  # (an unknown name raises InputError)
        except Unavailable as why:
            raise InputError(f"--kernel {kernel}: not offered on this machine ({why}); use --kernel auto") from None
        if not exact(k, dev, d):
            raise InputError(f"--kernel {kernel}: its products are not exact on this machine; use --kernel auto")
        if k.levels(d) < min_levels:
            raise InputError(
                f"--kernel {kernel}: keeps {k.levels(d)} quantisation levels exact, the rows "
                f"have {min_levels}; use --kernel auto"
            )
        return Choice(k, {}, "forced")
    key = (str(dev), d, min_levels, str(cache), json.dumps(identity, sort_keys=True))
    if candidates is None and key in _CHOSEN and exact(_CHOSEN[key].kernel, dev, d):  # (cheap; torch may be patched)
        return _CHOSEN[key]
    cands = available(dev) if candidates is None else candidates
    ident = {**(identity or machine(dev)), "width": d, "candidates": sorted(cands)}
    key_of_entry = entry_key(ident)
    path = cache or cache_path()
    data = read_entries(path)
    entry = data["entries"].get(key_of_entry)
    rates = entry.get("rates") if isinstance(entry, dict) else None
    if _valid_rates(rates, cands):
        source = "cached"
    else:
        rates, source = calibrate(cands, dev, d), "measured"
        data["entries"][key_of_entry] = {"machine": ident, "rates": rates, "measured": time.strftime("%Y-%m-%d")}
        write_entries(path, data)
    best = _fastest(cands, rates, d, min_levels)
    # (cheap checks: the library may have changed, or a kernel was found wrong once, say while a test
    # patched it, and is exact again, or a rated one is wrong now: any of them measures again, so that no
    # record rates a kernel that is not exact here)
    if source == "cached" and (
        best is None or any((rates.get(n) is None) == exact(k, dev, d) for n, k in cands.items())
    ):
        rates, source = calibrate(cands, dev, d), "measured"
        best = _fastest(cands, rates, d, min_levels)
    if best is None:
        raise InputError("no exact products kernel on this machine; check the torch install")
    choice = Choice(cands[best], {n: rates.get(n) for n in cands}, source)
    if candidates is None:
        _CHOSEN[key] = choice
    return choice
