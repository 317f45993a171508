"""The precision the encoders run in: fp32, bf16 or fp16, named by `--precision`, or chosen by measurement
(`auto`) as the join's products kernels are: both encoders' forward passes timed in each candidate precision
on the machine that embeds, the fastest kept, a lower precision only where it is at least MIN_GAIN times as
fast as fp32 (it moves every similarity a little: docs/embed.md gives the figures).

Candidates of `auto`: fp32 and bf16 (bf16 has fp32's range: no activation overflows); fp16 in bf16's place on
a GPU without bf16. On a CPU the timing is this thread's CPU time with torch in one thread (the load of a
shared machine does not move it), on a GPU wall time. Reads and writes one small JSON, the measurement cache
(VHMINE_PRECISION_CACHE [default: $XDG_CACHE_HOME/vhmine/precision.json, else ~/.cache/vhmine/precision.json]),
keyed by the machine (CPU model, cores, the instruction sets that matter, the GPU, torch's version) and by the
encoders' shapes (layers and input sizes, not their weights); a change of any of them measures again.

`requested` reads what was asked (the option, else VHMINE_PRECISION, else auto); `kept` reads the precision an
index or its embed job recorded (`precision` in job.json and manifest.json; an index from before this
record ran in the dtype its encoders' record names).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from vhmine.config import cache_file, cpu
from vhmine.errors import InputError
from vhmine.files import entry_key, read_entries, write_entries

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16", "fp16")
ENV = "VHMINE_PRECISION"
CACHE_ENV = "VHMINE_PRECISION_CACHE"
MIN_GAIN = 1.25  # a lower precision must be this much faster than fp32 to be chosen by `auto`
_SCHEMA = 1  # raise when what is measured changes: old cache entries are then measured again
_BUDGET = 0.5  # seconds the timed passes of one candidate may take, about (at least one pass is timed)
_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16", "amx_tile")
_DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def torch_dtype(name: str):
    """The torch dtype of a precision name."""
    import torch

    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def name_of(dtype) -> str | None:
    """fp32 / bf16 / fp16 for a torch dtype or its name ("bfloat16", "torch.float16"); None for others."""
    return _DTYPE_NAMES.get(str(dtype).replace("torch.", ""))


def asked(value: str | None, option: str, env: str, words) -> str:
    """The word asked for: `value` (the option), else the variable `env`, else auto, lower case; InputError
    naming where it came from for a word not in `words` (nor auto)."""
    wanted = (value or os.environ.get(env) or "auto").strip().lower()
    if wanted not in (*words, "auto"):
        raise InputError(f"{option if value else env} {wanted}: use {', '.join(words)} or auto")
    return wanted


def requested(value: str | None) -> str:
    """The precision asked for: `value`, else VHMINE_PRECISION, else auto; InputError for another word."""
    return asked(value, "--precision", ENV, PRECISIONS)


def kept(record: dict | None) -> str | None:
    """The precision a job.json or manifest.json recorded (its `precision`, else its encoders' dtype), or None."""
    if not isinstance(record, dict):
        return None
    named = (record.get("precision") or {}).get("name") if isinstance(record.get("precision"), dict) else None
    if named in PRECISIONS:
        return named
    encoders = record.get("encoders") or {}
    found = {name_of((encoders.get(k) or {}).get("dtype")) for k in ("clip", "dino")} - {None}
    return found.pop() if len(found) == 1 else None


def candidates(device) -> list[str]:
    """What `auto` measures on this device: fp32 and bf16, or fp32 and fp16 on a GPU without bf16."""
    import torch

    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return ["fp32", "fp16"]
    return ["fp32", "bf16"]


@dataclass(frozen=True)
class Choice:
    """The precision the encoders run in, how it was chosen (source: measured, cached, forced by
    --precision, or the index's: a grown index keeps its own) and the candidates' measured rates."""

    name: str
    source: str = "forced"
    rates: dict = field(default_factory=dict)  # precision -> images/s of both forward passes (one CPU thread)

    @property
    def dtype(self):
        return torch_dtype(self.name)

    def record(self) -> dict:
        """What job.json and manifest.json keep (no machine path or name)."""
        rates = {k: round(v, 2) for k, v in self.rates.items()}
        return {"name": self.name, "chosen": self.source, **({"images_per_s": rates} if rates else {})}

    def line(self) -> str:
        shown = ", ".join(f"{k} {v:.1f}" for k, v in self.rates.items())
        how = {
            "forced": "named by --precision",
            "index": "the index's own: it was embedded in it",
        }.get(self.source, f"{self.source} here: the fastest, a lower precision only at {MIN_GAIN:g}x fp32's rate")
        unit = "images/s in one thread" if self.rates else ""
        return f"embedding precision: {self.name} ({how}" + (f"; {unit}: {shown})" if shown else ")")


def precision_line(record: dict) -> str:
    """Choice.line of a record that job.json or manifest.json keeps."""
    return Choice(record["name"], record.get("chosen", "forced"), record.get("images_per_s") or {}).line()


def cache_path() -> Path:
    return cache_file(CACHE_ENV, "precision.json")


def machine(device) -> dict:
    """What the measured rates depend on: the CPU (model, cores, instruction sets), the GPU, torch."""
    import torch

    model, flags = cpu(_FLAGS)
    m = {
        "schema": _SCHEMA,
        "device": device.type,
        "cpu": model,
        "cores": os.cpu_count(),
        "flags": flags,
        "torch": torch.__version__,
        "isa": torch.backends.cpu.get_cpu_capability(),
    }
    if device.type == "cuda":
        m["gpu"] = torch.cuda.get_device_name(device)
    return m


def shapes(encoders) -> dict:
    """The encoders' architecture, not their weights: each one's parameter shapes (hashed) and input size."""
    out = {}
    for enc in encoders:
        h = hashlib.sha256()
        for name, p in enc.model.named_parameters():
            h.update(f"{name}:{tuple(p.shape)};".encode())
        out[enc.kind] = {
            "model": type(enc.model).__name__,
            "params": h.hexdigest()[:16],
            "input": example_input(enc)[1],
        }
    return out


def example_input(enc):
    """A preprocessed batch of one synthetic photo-sized picture, and its shape."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    img = Image.fromarray(rng.integers(0, 256, (480, 640, 3), dtype=np.uint8))
    x = enc.preprocess(img)[None]
    return x, list(x.shape[1:])


def measure(encoders, device, names: list[str], budget: float = _BUDGET) -> tuple[dict, dict]:
    """({precision: images/s of every encoder's forward pass, one after the other}, {precision: the models
    cast to it}) for fp32 models `encoders`: each precision on a copy (a cast back to fp32 would lose bits),
    warmed once, then the best of the passes that fit in `budget`. On a CPU in one torch thread, timed by this
    thread's CPU time; on a GPU by wall time."""
    import torch

    cpu = device.type == "cpu"
    batch = 2 if cpu else 16
    inputs = {enc.kind: example_input(enc)[0].expand(batch, -1, -1, -1).contiguous().to(device) for enc in encoders}
    threads = torch.get_num_threads()
    rates, cast = {}, {}
    if cpu:
        torch.set_num_threads(1)
    try:
        for name in names:
            dtype = torch_dtype(name)
            models = {
                enc.kind: (enc.model if name == "fp32" else copy.deepcopy(enc.model).to(dtype)) for enc in encoders
            }

            def once(n: int, models=models, dtype=dtype) -> float:
                if not cpu:
                    torch.cuda.synchronize(device)
                w0, t0 = time.perf_counter(), time.thread_time()
                with torch.inference_mode():
                    for enc in encoders:
                        enc.forward(models[enc.kind], inputs[enc.kind][:n].to(dtype))
                if not cpu:
                    torch.cuda.synchronize(device)
                return max(time.thread_time() - t0 if cpu else time.perf_counter() - w0, 1e-9)

            once(1)  # warm: the first pass packs weights and allocates
            rates[name] = batch / best_pass(lambda once=once: once(batch), budget)
            cast[name] = models
    finally:
        torch.set_num_threads(threads)
    return rates, cast


def best_pass(once, budget: float) -> float:
    """The least time `once()` took over the passes that fit in `budget` seconds, at least one (the caller warms
    it first); a slow model stops after a pass of a third of the budget: one more would not say more."""
    best, spent = math.inf, 0.0
    while spent < budget or best == math.inf:
        t = once()
        best, spent = min(best, t), spent + t
        if spent > budget / 3 and t > budget / 3:
            break
    return best


def cached_rates(path: Path, ident: dict, names: list[str], measure, doing: str) -> tuple[dict, str, object]:
    """(images/s of each of `names`, "cached" or "measured", what `measure` gave beside its rates, else None):
    the rates kept in the cache file at `path` for `ident` (the machine and what else they depend on) when they
    cover `names`, else `measure()`'s (rates, extra), kept there; `doing` is said in the log before measuring."""
    key = entry_key(ident)
    data = read_entries(path)
    entry = data["entries"].get(key)
    rates = entry.get("rates") if isinstance(entry, dict) else None
    if isinstance(rates, dict) and set(rates) == set(names):
        return rates, "cached", None
    log.info("measuring the encoders' speed %s", doing)
    rates, extra = measure()
    data["entries"][key] = {"machine": ident, "rates": rates, "measured": time.strftime("%Y-%m-%d")}
    write_entries(path, data)
    return rates, "measured", extra


def fastest(rates: dict) -> str:
    """The fastest precision, a lower one only where it is at least MIN_GAIN times fp32's rate."""
    best = max(rates, key=rates.get)
    if best != "fp32" and "fp32" in rates and rates[best] < MIN_GAIN * rates["fp32"]:
        return "fp32"
    return best


def choose(encoders, device, wanted: str, *, source: str = "forced", cache: Path | None = None) -> Choice:
    """The precision for fp32-loaded `encoders` on `device`, and the encoders cast to it (in place: each
    Encoder's model and dtype). `wanted`: a precision (recorded with `source`: forced, or index where it is an
    index's own), or auto: the rates cached for this machine and these shapes, else measured now and cached."""
    if wanted != "auto":
        choice = Choice(requested(wanted), source)
        models = None
    else:
        names = candidates(device)
        ident = {**machine(device), "encoders": shapes(encoders), "candidates": names}
        rates, source, models = cached_rates(
            cache or cache_path(),
            ident,
            names,
            lambda: measure(encoders, device, names),
            f"in {' and '.join(names)} (once per machine and encoders)",
        )
        choice = Choice(fastest(rates), source, {k: rates[k] for k in names})
    for enc in encoders:
        enc.model = models[choice.name][enc.kind] if models else enc.model.to(choice.dtype)
        enc.dtype = choice.dtype
    return choice
