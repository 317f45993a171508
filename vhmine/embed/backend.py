"""The runtime the encoders run on: torch (eager) or OpenVINO (CPU only; the `cpu` extra), named by
`--backend` or chosen by measurement (`auto`) as the precision is (embed.precision): both encoders' forward
passes timed on each runtime installed, in the precision already chosen, on the machine that embeds; the
fastest kept, OpenVINO only where it is at least MIN_GAIN times torch's rate.

On a CPU the timing is this process's CPU time with each runtime in one thread (the load of a shared machine
moves it less than wall time). OpenVINO runs the models converted from the loaded torch modules
(openvino.convert_model, batch left dynamic), in the precision's hint (f32 or bf16), with torch's thread count.
Without the openvino package (the plain install) the runtime is torch, and a run that named openvino says so
and goes on in torch. On a GPU it is torch.

Reads and writes one small JSON, the measurement cache (VHMINE_BACKEND_CACHE [default:
$XDG_CACHE_HOME/vhmine/backend.json, else ~/.cache/vhmine/backend.json]), keyed by the machine
(embed.precision.machine), the encoders' shapes, the precision and openvino's version; and beside it, in
openvino/, the converted encoders (OpenVINO IR, keyed by their weights' bytes: the newest KEEP_CONVERTED),
which a later load reads instead of converting again. `requested` reads
what was asked (the option, else VHMINE_EMBED_BACKEND, else auto). The choice's `record()` is what
manifest.json and job.json keep under `backend` (name, how chosen, rates, threads, batch size).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from vhmine.config import cache_file
from vhmine.errors import InputError

log = logging.getLogger(__name__)

BACKENDS = ("torch", "openvino")
ENV = "VHMINE_EMBED_BACKEND"
CACHE_ENV = "VHMINE_BACKEND_CACHE"
MIN_GAIN = 1.05  # OpenVINO must be this much faster than torch to be chosen by `auto` (a conversion at each load)
_SCHEMA = 1
_BUDGET = 0.5  # seconds the timed passes of one runtime may take, about (at least one pass is timed)
_HINTS = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}
KEEP_CONVERTED = 4  # converted encoders kept in the cache folder's openvino/ (two CLIP + DINOv2 pairs)


def requested(value: str | None) -> str:
    """The runtime asked for: `value`, else VHMINE_EMBED_BACKEND, else auto; InputError for another word."""
    from vhmine.embed.precision import asked

    return asked(value, "--backend", ENV, BACKENDS)


def openvino_version() -> str | None:
    """openvino's version, or None where it is not installed (or does not import)."""
    try:
        import openvino
    except ImportError:
        return None
    return str(openvino.__version__)


@dataclass(frozen=True)
class Backend:
    """The runtime the encoders run on, how it was chosen (measured, cached, forced by --backend, only: the one
    installed, device: a GPU's, fallback: openvino named but not installed) and the measured rates."""

    name: str
    source: str = "forced"
    rates: dict = field(default_factory=dict)  # runtime -> images/s of both forward passes (one thread)
    threads: int = 1
    note: str = ""

    def record(self, batch_size: int | None = None) -> dict:
        """What job.json and manifest.json keep (no machine path or name)."""
        out = {"name": self.name, "chosen": self.source, "threads": self.threads}
        if self.rates:
            out["images_per_s"] = {k: round(v, 2) for k, v in self.rates.items()}
        if batch_size:
            out["batch_size"] = batch_size
        if self.note:
            out["note"] = self.note
        return out

    def line(self) -> str:
        how = {
            "forced": "named by --backend",
            "only": "the one installed: `pip install vhmine[cpu]` adds openvino",
            "device": "a GPU runs torch",
            "fallback": self.note,
        }.get(self.source, f"{self.source} here: the fastest, openvino only at {MIN_GAIN:g}x torch's rate")
        shown = ", ".join(f"{k} {v:.1f}" for k, v in self.rates.items())
        rates = f"; images/s in one thread: {shown}" if shown else ""
        return f"embedding runtime: {self.name} in {self.threads} threads ({how}{rates})"


def cache_path() -> Path:
    return cache_file(CACHE_ENV, "backend.json")


class OpenVINOModel:
    """An encoder's forward pass compiled by OpenVINO: called with a (B, C, H, W) tensor, returns the (B, dim)
    float32 tensor the torch forward returns. `ov_model` is the converted model, kept to compile again."""

    def __init__(self, ov_model, precision: str, threads: int):
        import openvino as ov

        self.ov_model, self.precision, self.threads = ov_model, precision, threads
        config = {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": _HINTS[precision]}
        self.compiled = ov.Core().compile_model(ov_model, "CPU", {**config, "PERFORMANCE_HINT": "LATENCY"})
        self.request = self.compiled.create_infer_request()

    def __call__(self, x):
        import torch

        out = self.request.infer([x.float().numpy()])[self.compiled.output(0)]
        return torch.from_numpy(out.copy())


def _openvino_forward(model, x):
    return model(x)


def _converted_folder() -> Path:
    return cache_path().parent / "openvino"


def _key(enc, model, precision: str, shape) -> str:
    """What a converted model depends on: the runtimes' versions, the precision, the encoder's forward and input
    shape, and every weight's bytes (hashed: about a second a GB)."""
    import hashlib

    import openvino
    import torch

    ident = (
        f"{_SCHEMA}|{openvino.__version__}|{torch.__version__}|{precision}|{enc.kind}|{type(model).__name__}|{shape}"
    )
    h = hashlib.sha256(ident.encode())
    for name, t in model.state_dict().items():
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.detach().contiguous().reshape(-1).view(torch.uint8).numpy())
    return h.hexdigest()[:24]


def _keep_newest(folder: Path, keep: int = KEEP_CONVERTED) -> None:
    """Delete all but the `keep` most recently used converted models in folder (each an .xml and its .bin)."""
    xmls = sorted(folder.glob("*.xml"), key=lambda p: p.stat().st_mtime, reverse=True)
    for xml in xmls[keep:]:
        for f in (xml, xml.with_suffix(".bin")):
            f.unlink(missing_ok=True)


def convert(enc, precision: str, threads: int) -> OpenVINOModel:
    """The torch encoder `enc` (its model, in the precision's dtype, and forward) converted to an
    OpenVINOModel, batch dynamic: from an fp32 copy of its weights (a bf16 model's weights as rounded). The
    converted model is kept in the cache folder's openvino/ (KEEP_CONVERTED of them, the most recently used)
    and read back by a later load of the same weights, which then skips the trace and the conversion."""
    import copy

    import openvino as ov
    import torch

    from vhmine.embed.precision import example_input

    class Forward(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = enc.model if enc.dtype == torch.float32 else copy.deepcopy(enc.model).float()

        def forward(self, x):
            return enc.forward(self.model, x)

    x, shape = example_input(enc)
    forward = Forward().eval()
    folder = _converted_folder()
    xml = folder / f"{enc.kind}-{_key(enc, forward.model, precision, shape)}.xml"
    if xml.is_file() and xml.with_suffix(".bin").is_file():
        try:
            ov_model = ov.Core().read_model(str(xml))
            os.utime(xml)  # (most recently used)
            return OpenVINOModel(ov_model, precision, threads)
        except (RuntimeError, OSError) as err:
            log.warning("%s: unreadable (%s); converting the encoder again", xml, err)
    with torch.no_grad():
        ov_model = ov.convert_model(forward, example_input=x, input=[ov.PartialShape([-1, *shape])])
    try:  # by rename, the .xml last: a reader that sees it sees its .bin
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{xml.stem}.{os.getpid()}.xml"
        ov.save_model(ov_model, str(tmp), compress_to_fp16=False)
        os.replace(tmp.with_suffix(".bin"), xml.with_suffix(".bin"))
        os.replace(tmp, xml)
        _keep_newest(folder)
    except (OSError, RuntimeError) as err:
        log.info("could not keep the converted encoder in %s (%s): converted again at the next load", folder, err)
    return OpenVINOModel(ov_model, precision, threads)


def measure(encoders, precision: str, names: list[str], budget: float = _BUDGET) -> tuple[dict, dict]:
    """({runtime: images/s of every encoder's forward pass, one after the other}, {"openvino": {kind:
    OpenVINOModel}} where measured) for `encoders` already cast to `precision`, each runtime in one thread,
    timed by this process's CPU time: warmed once, then the best of the passes that fit in `budget`."""
    import torch

    from vhmine.embed.precision import best_pass, example_input

    batch = 2
    inputs = {enc.kind: example_input(enc)[0].expand(batch, -1, -1, -1).contiguous() for enc in encoders}
    threads = torch.get_num_threads()
    rates, converted = {}, {}
    torch.set_num_threads(1)
    try:
        for name in names:
            if name == "torch":
                run = {enc.kind: (lambda x, enc=enc: enc.forward(enc.model, x.to(enc.dtype))) for enc in encoders}
            else:
                converted["openvino"] = {enc.kind: convert(enc, precision, 1) for enc in encoders}
                run = converted["openvino"]

            def once(run=run) -> float:
                t0 = time.process_time()
                with torch.inference_mode():
                    for enc in encoders:
                        run[enc.kind](inputs[enc.kind])
                return max(time.process_time() - t0, 1e-9)

            once()  # warm: the first pass packs weights and allocates
            rates[name] = batch / best_pass(once, budget)
    finally:
        torch.set_num_threads(threads)
    return rates, converted


def _use_openvino(encoders, precision: str, threads: int, converted: dict | None) -> None:
    """Run the encoders on OpenVINO in `threads` threads (converted now unless measured already: `converted`,
    {kind: OpenVINOModel})."""
    for enc in encoders:
        done = (converted or {}).get(enc.kind)
        enc.model = OpenVINOModel(done.ov_model, precision, threads) if done else convert(enc, precision, threads)
        enc.forward = _openvino_forward


def choose(encoders, device, wanted: str, precision: str, *, cache: Path | None = None) -> Backend:
    """The runtime for `encoders` (on `device`, already cast to `precision`: embed.precision) and, where
    it is openvino, the encoders switched to it in place (each Encoder's model and forward). `wanted`: torch,
    openvino or auto (the rates cached for this machine, these shapes and this precision, else measured now
    and cached); openvino without the package, or on a GPU, falls back to torch and says so."""
    import torch

    threads = torch.get_num_threads()
    version = openvino_version()
    if device.type != "cpu":
        return Backend("torch", "device" if wanted != "torch" else "forced", threads=threads)
    if wanted == "torch" or (wanted == "auto" and version is None):
        return Backend("torch", "forced" if wanted == "torch" else "only", threads=threads)
    if version is None:  # openvino named, not installed
        note = "openvino named but not installed (`pip install vhmine[cpu]` adds it): running torch"
        log.warning("%s", note)
        return Backend("torch", "fallback", threads=threads, note=note)
    if precision not in _HINTS:
        raise InputError(f"--backend openvino runs fp32, bf16 or fp16, not {precision}")
    converted = None
    if wanted == "openvino":
        choice = Backend("openvino", "forced", threads=threads)
    else:
        from vhmine.embed.precision import cached_rates, machine, shapes

        names = list(BACKENDS)
        ident = {**machine(device), "encoders": shapes(encoders), "precision": precision, "openvino": version}
        ident["backend_schema"] = _SCHEMA
        rates, source, converted = cached_rates(
            cache or cache_path(),
            ident,
            names,
            lambda: measure(encoders, precision, names),
            f"on torch and openvino in {precision} (once per machine)",
        )
        best = "openvino" if rates["openvino"] >= MIN_GAIN * rates["torch"] else "torch"
        choice = Backend(best, source, {k: rates[k] for k in names}, threads=threads)
    if choice.name == "openvino":  # (measure's conversions, by runtime, reused: not converted again)
        _use_openvino(encoders, precision, threads, (converted or {}).get("openvino"))
    return choice
