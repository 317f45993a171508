"""The products kernels of the fast pass: a @ b.T of int8 rows, exactly, each its own way (`build`,
`available`); the choice among them by measurement is vhmine.mine.join.calibrate's. Reads and writes nothing.

Every kernel gives the exact integer products of rows with integers in [-L, L], L = levels(d) =
min(qmax_for(d), cap), so quantise's error bound holds as it is: the kernel adds no error, and
a narrower range (a coarser step) enters that bound through the scale.

- int-mm: torch._int_mm, int8 x int8 into int32: integer arithmetic, |sum| <= L^2 d < 2^24.
- fbgemm: torch.ops.quantized.linear_with_input_q_dq_qweight_dq_output_fp32, scales 1.0, the input's
  zero point L: fbgemm multiplies u8 (q + L, in [0, 2L]) by s8 (in [-L, L]), sums in int32, subtracts
  L times the column sums and multiplies by 1.0 * 1.0 into float32. Without VNNI (AVX2, AVX-512 without
  VNNI) it first adds pairs of products in int16 with saturation (vpmaddubsw); cap = 90 keeps every
  pair within 2 * 180 * 90 = 32,400 < 32,767, so nothing saturates, and the int32 result, an integer of
  magnitude below 2^24, is exact in float32.
- blas-f32 (numpy's BLAS), torch-f32: float32 GEMM of the integer rows. Every operand is an integer
  below 2^8 and every partial sum, in whatever order and blocking the library adds them, fused or not,
  an integer of magnitude at most L^2 d < 2^24: no operation rounds. (On CUDA, TF32 rounds operands to
  11 significant bits, which integers up to 2^11 keep.)
- bf16: bfloat16 operands (8 significant bits: integers up to 256 are exact) with float32 accumulation
  and output (torch.mm's out_dtype): as float32. Where bf16 is native: AMX on a CPU, or CUDA.

Each kernel is also checked on rows at the ends of its range before it is used or timed (`exact`): one
whose library breaks the reasoning above is never used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from vhmine.errors import InputError


def qmax_for(d: int) -> int:
    """Quantisation levels (quantise.fast_pass's default and ceiling): qmax^2 * d below 2**24 keeps the
    float32 fallback exact as well as int32."""
    return min(127, math.isqrt((2**24 - 1) // max(d, 1)))


# every name --kernel takes, in ranking ties' order
KERNELS = ("int-mm", "fbgemm", "blas-f32", "torch-f32", "bf16")
FBGEMM_CAP = 90  # 2 * (2 * 90) * 90 = 32,400: a pair of u8 x s8 products never saturates int16
CAPS = {"fbgemm": FBGEMM_CAP}  # the largest |q| each kernel keeps exact: 127 (int8's) unless named here


@dataclass(frozen=True)
class Kernel:
    """One way to compute a @ b.T of int8 row tensors a, b on a device: left(a) and right(b) convert
    (or prepack) the operands once, mm(left, right, out) computes the product, into `out` (a tensor of
    dtype `out`) where the library can write there, and returns it."""

    name: str
    device: str  # torch device type
    cap: int  # the largest |q| this kernel's arithmetic keeps exact
    out: str  # "int32" or "float32"
    left: Callable
    right: Callable
    mm: Callable

    def levels(self, d: int) -> int:
        """The quantisation levels for rows of width d: |q| <= this keeps this kernel exact."""
        return min(qmax_for(d), self.cap)

    def product(self, a, b, out=None):
        """a @ b.T (int8 row tensors) as this kernel computes it."""
        import torch

        if out is None:
            out = torch.empty(len(a), len(b), dtype=getattr(torch, self.out), device=a.device)
        return self.mm(self.left(a), self.right(b), out)


def levels_of(name: str, d: int) -> int:
    """Kernel.levels of the kernel `name`, without building it (where it may not run: a Ray driver)."""
    if name not in KERNELS:
        build(name, "cpu")  # raises InputError, naming the kernels there are
    return min(qmax_for(d), CAPS.get(name, 127))


class Unavailable(Exception):
    """A kernel this machine or library does not offer (its reason: one line)."""


def build(name: str, device) -> Kernel:
    """The kernel `name` on a torch device; raises Unavailable where this machine has no such kernel."""
    import torch

    dev = torch.device(device)
    cpu, cuda = dev.type == "cpu", dev.type == "cuda"
    if name == "int-mm":
        if not hasattr(torch, "_int_mm"):
            raise Unavailable("this torch has no _int_mm")
        return Kernel(name, dev.type, 127, "int32", _same, _same, lambda a, b, out: torch._int_mm(a, b.T, out=out))
    if name == "fbgemm":
        if not cpu or "fbgemm" not in torch.backends.quantized.supported_engines:
            raise Unavailable("fbgemm runs on CPUs only, in torch builds with its quantized engine")
        op = getattr(torch.ops.quantized, "linear_with_input_q_dq_qweight_dq_output_fp32", None)
        if op is None:
            raise Unavailable("this torch has no fbgemm linear with float32 output")
        return Kernel(
            name, "cpu", CAPS[name], "float32", _as_float, _fbgemm_pack, lambda a, b, out: op(a, 1.0, FBGEMM_CAP, b)
        )
    if name == "blas-f32":
        if not cpu:
            raise Unavailable("numpy's BLAS runs on the CPU")
        return Kernel(name, "cpu", 127, "float32", _as_float_array, _as_float_array, _numpy_mm)
    if name == "torch-f32":
        return Kernel(name, dev.type, 127, "float32", _as_float, _as_float, lambda a, b, out: torch.mm(a, b.T, out=out))
    if name == "bf16":
        if cpu and not (hasattr(torch.cpu, "_is_amx_tile_supported") and torch.cpu._is_amx_tile_supported()):
            raise Unavailable("bfloat16 products are slow on a CPU without AMX")
        if not (cpu or cuda):
            raise Unavailable(f"no bfloat16 kernel for {dev.type}")
        return Kernel(
            name,
            dev.type,
            127,
            "float32",
            _as_bf16,
            _as_bf16,
            lambda a, b, out: torch.mm(a, b.T, out_dtype=torch.float32),
        )
    raise InputError(f"--kernel {name}: not a products kernel; use one of {', '.join(('auto',) + KERNELS)}")


def _same(t):
    return t


def _as_float(t):
    import torch

    return t.to(torch.float32)


def _as_bf16(t):
    import torch

    return t.to(torch.bfloat16)


def _as_float_array(t):
    return t.to(dtype=_torch().float32).numpy()


def _torch():
    import torch

    return torch


def _numpy_mm(a, b, out):
    np.matmul(a, b.T, out=out.numpy())
    return out


def _fbgemm_pack(t):
    """int8 rows as fbgemm's prepacked weight: a qint8 tensor of scale 1, zero point 0 (integer values
    unchanged). The quantized tensor API warns that it will go; the warning is said once, not here."""
    import warnings

    torch = _torch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w = torch.quantize_per_tensor(t.to(torch.float32), 1.0, 0, torch.qint8)
        return torch.ops.quantized.linear_prepack(w, None)


def probe_rows(levels: int, d: int, rows: int = 64, seed: int = 0) -> np.ndarray:
    """int8 rows in [-levels, levels] with the hardest cases first: all +levels, all -levels, and
    alternating signs (pairs of products at both ends of the range, where int16 saturates)."""
    p = np.random.default_rng(seed).integers(-levels, levels + 1, (rows, d))
    p[0], p[1] = levels, -levels
    p[2, 0::2], p[2, 1::2] = levels, -levels
    p[3, 0::2], p[3, 1::2] = -levels, levels
    return p.astype(np.int8)


def exact(kernel: Kernel, device, d: int) -> bool:
    """Whether the kernel's products of probe_rows (at its levels for width d) equal numpy's in int64."""
    import torch

    p = probe_rows(kernel.levels(d), d)
    t = torch.from_numpy(p).to(device)
    try:
        got = kernel.product(t, t).cpu().numpy()
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return False
    want = p.astype(np.int64) @ p.astype(np.int64).T
    return bool(np.array_equal(got.astype(np.int64), want) and np.array_equal(got, want.astype(got.dtype)))


def available(device) -> dict:
    """{name: Kernel} of every kernel this machine's libraries offer on the device (exact or not)."""
    out = {}
    for name in KERNELS:
        try:
            out[name] = build(name, device)
        except Unavailable:
            pass
    return out
