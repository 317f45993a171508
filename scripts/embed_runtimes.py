"""The ways the field runs ViT encoders on a CPU, side by side (scripts/bench_embed.py's runtime table): both
encoders' forward passes in each precision on torch eager, OpenVINO (vhmine.embed.backend's conversion),
ONNX Runtime (torch.onnx export, fp32: its CPU provider has no bf16 kernels for these layers) and, with
--compile, torch.compile (inductor), at the batch sizes and thread counts asked; GMAC per CPU second of the
process (every thread) and its share of the instruction peak (scripts/bench_peak.py). A runtime whose package
is not installed is left out and said so.

MACs are counted once by torch's FlopCounterMode over one image, with torch's fused attention fast path
turned off (nn.MultiheadAttention's native kernel is invisible to the counter: CLIP's attention projections
and products would be left out) and the CPU flash-attention kernel counted (QK^T and AV: the counter has no
formula for it). Reads the encoders' files; writes ONNX files in a temporary folder only. `peak_lines` states
each precision's best row against the instruction peak (bench_peak.peak).
"""

from __future__ import annotations

import copy
import tempfile
import time
from pathlib import Path


def macs_per_image(encoders) -> dict:
    """{kind: MACs of one 1-image forward pass} of fp32 torch `encoders` (vhmine.embed.encoders.Encoder)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from vhmine.embed.precision import example_input

    def sdpa_cpu(q_shape, k_shape, v_shape, *args, **kw):  # flops of QK^T and AV, 2 a MAC
        b, h, s, d = q_shape
        return 2 * b * h * s * k_shape[2] * (d + v_shape[3])

    mapping = {torch.ops.aten._scaled_dot_product_flash_attention_for_cpu: sdpa_cpu}
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    out = {}
    try:
        for enc in encoders:
            with FlopCounterMode(display=False, custom_mapping=mapping) as fc, torch.no_grad():
                enc.forward(enc.model, example_input(enc)[0].to(enc.dtype))
            out[enc.kind] = fc.get_total_flops() / 2
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    return out


def installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _torch_runs(encoders, compiled: bool):
    import torch

    runs = {}
    for enc in encoders:
        forward = torch.compile(enc.forward) if compiled else enc.forward  # (compiled at the first, warm pass)
        runs[enc.kind] = lambda x, forward=forward, enc=enc: forward(enc.model, x.to(enc.dtype))
    return runs


def _openvino_runs(encoders, precision: str, threads: int, converted: dict):
    from vhmine.embed.backend import OpenVINOModel, convert

    runs = {}
    for enc in encoders:
        if enc.kind not in converted:
            converted[enc.kind] = convert(enc, precision, threads).ov_model
        runs[enc.kind] = OpenVINOModel(converted[enc.kind], precision, threads)
    return runs


def _onnxruntime_runs(encoders, threads: int, folder: Path):
    import onnxruntime as ort
    import torch

    from vhmine.embed.precision import example_input

    runs = {}
    for enc in encoders:
        path = folder / f"{enc.kind}.onnx"
        if not path.exists():

            class Forward(torch.nn.Module):
                def __init__(self, enc=enc):
                    super().__init__()
                    self.model, self.enc = enc.model, enc

                def forward(self, x):
                    return self.enc.forward(self.model, x)

            x = example_input(enc)[0].expand(2, -1, -1, -1).contiguous()
            batch = torch.export.Dim("batch", min=1)
            torch.onnx.export(
                Forward().eval(), (x,), str(path), dynamo=True, dynamic_shapes=({0: batch},), verbose=False
            )
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        sess = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        runs[enc.kind] = lambda x, sess=sess, name=name: sess.run(None, {name: x.float().numpy()})
    return runs


def _time(runs, inputs, repeat: int) -> tuple[float, float]:
    """(best CPU s, its wall s) of one pass of every encoder over its input, after a warm pass."""
    import torch

    best = (float("inf"), 0.0)
    with torch.inference_mode():
        for k in range(repeat + 1):
            c0, w0 = time.process_time(), time.perf_counter()
            for kind, run in runs.items():
                run(inputs[kind])
            got = (time.process_time() - c0, time.perf_counter() - w0)
            if k:  # the first pass warms: packs weights, allocates, compiles
                best = min(best, got)
    return best


def table(specs, precisions, backends, batch_sizes, threads, repeat: int = 2, log=print) -> list[dict]:
    """One row a (precision, runtime, batch size, threads): GMAC per CPU s, images/s by wall time, setup CPU s
    (conversion, export, compile: once a load). Rows of a runtime not installed are left out (said by `log`)."""
    import torch

    from vhmine.embed.encoders import load_clip, load_dino
    from vhmine.embed.precision import choose, example_input

    available = {
        "torch": True,
        "compile": True,
        "openvino": installed("openvino"),
        "onnxruntime": installed("onnxruntime"),
    }
    for b in backends:
        if not available.get(b, False):
            log(f"runtime {b}: not installed here, left out")
    backends = [b for b in backends if available.get(b, False)]
    base = (load_clip(specs[0], "cpu"), load_dino(specs[1], "cpu"))
    macs = sum(macs_per_image(base).values())
    rows, all_threads = [], torch.get_num_threads()
    for precision in precisions:
        encoders = copy.deepcopy(base)
        choose(encoders, torch.device("cpu"), precision)
        for backend in backends:
            if backend == "onnxruntime" and precision != "fp32":
                log(f"onnxruntime {precision}: left out (its CPU provider has no bf16 kernels for these layers)")
                continue
            converted: dict = {}
            with tempfile.TemporaryDirectory() as tmp:
                for t in threads:
                    t = all_threads if t == 0 else t
                    torch.set_num_threads(t)
                    try:
                        c0 = time.process_time()
                        if backend in ("torch", "compile"):
                            runs = _torch_runs(encoders, backend == "compile")
                        elif backend == "openvino":
                            runs = _openvino_runs(encoders, precision, t, converted)
                        else:
                            runs = _onnxruntime_runs(encoders, t, Path(tmp))
                        setup = time.process_time() - c0
                        for bs in batch_sizes:
                            inputs = {e.kind: example_input(e)[0].expand(bs, -1, -1, -1).contiguous() for e in encoders}
                            cpu_s, wall_s = _time(runs, inputs, repeat)
                            row = dict(precision=precision, backend=backend, batch=bs, threads=t, setup_cpu_s=setup)
                            row.update(gmac_per_cpu_s=bs * macs / cpu_s / 1e9, images_per_s=bs / wall_s)
                            rows.append(row)
                            log(
                                f"  {precision} {backend} batch {bs} threads {t}: {row['gmac_per_cpu_s']:.1f} GMAC per "
                                f"CPU-s, {row['images_per_s']:.2f} images/s (setup {setup:.1f} CPU s)"
                            )
                    finally:
                        torch.set_num_threads(all_threads)
    return rows


def instruction(name: str) -> str:
    """The instruction of a bench_peak family name ("avx512_bf16 VDPBF16PS zmm, a C hand loop" -> VDPBF16PS),
    else the family ("amx_bf16, torch mm in cache" -> amx_bf16)."""
    words = name.replace(",", " ").split()
    return next((w for w in words if w.isupper() and w[0].isalpha()), words[0])


def peak_lines(rows: list[dict], precisions, macs_gmac: float) -> list[str]:
    """For each precision, its best row of the runtime table against the instruction peak measured here:
    `P: G GMAC per CPU-s, S% of the PEAKNAME peak (K GMAC/s a core, measured here)`, then which way ran it."""
    from bench_peak import peak

    lines = []
    for p in precisions:
        mine = [r for r in rows if r["precision"] == p]
        if not mine or p not in ("fp32", "bf16"):
            continue
        best = max(mine, key=lambda r: r["gmac_per_cpu_s"])
        rate, name = peak(p)
        g = best["gmac_per_cpu_s"]
        lines.append(
            f"{p}: {g:.1f} GMAC per CPU-s, {100 * g / rate:.1f}% of the {instruction(name)} peak "
            f"({rate:.1f} GMAC/s a core, measured here)"
        )
        lines.append(
            f"  ({best['backend']}, batch {best['batch']}, threads {best['threads']}: {best['images_per_s']:.2f} "
            f"images/s; {macs_gmac:.3g} GMAC an image; peak by {name})"
        )
    return lines
