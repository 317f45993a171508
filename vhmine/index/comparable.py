"""Whether two indexes' vectors can be compared (`vhmine mine --against`): each encoder of a manifest's
`encoders` entry (written by vhmine.embed.encoders) known by what it is, not by how its spec was typed, then
its width, its precision and its preprocessing. Reads only the manifests it is given (dicts), never a file.

What an encoder is: its files' checksums (`weights_sha256`: the weights and config of local weights, a folder
or a checkpoint file, recorded at embed time) where both records have them, so a folder copied elsewhere is
the same encoder and a folder whose weights were replaced is another; else its weights as recorded
(`weights`: the resolved folder or file of local weights, every index has it; the pretrained tag of an
open_clip model; the hub id of a DINOv2), so `local-dir:models/clip` and `local-dir:/abs/models/clip` are
one encoder; a record without either (an index written by hand) by its spec, a `local-dir:` folder resolved
against the current folder. The open_clip architecture named beside a checkpoint file counts too
(`ViT-B-32` and `ViT-B-32-quickgelu` on one file differ).

Precision is a difference too (docs/embed.md: one index, one precision): bf16 and fp32 vectors of one encoder
agree only approximately, so a pair near a threshold would pass or fail by the precision alone. A record that
does not say (no dtype, no `precision`) is not refused for it.
"""

from __future__ import annotations

from pathlib import Path

KINDS = ("clip", "dino")
_PRECISION = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}  # torch's dtype names, as recorded


def _entry(manifest: dict, kind: str) -> dict:
    e = (manifest.get("encoders") or {}).get(kind)
    return e if isinstance(e, dict) else {}


def _architecture(e: dict):
    """open_clip's model name, which names an architecture, except for `local-dir:` (the spec as typed: its
    config file is in the checksums)."""
    model = e.get("model")
    return None if model is None or str(model).startswith("local-dir:") else model


def _spec(e: dict) -> str:
    spec = str(e.get("spec") or e.get("model") or "")
    if spec.startswith("local-dir:"):
        return "local-dir:" + str(Path(spec[len("local-dir:") :]).expanduser().resolve())
    return spec


def same_encoder(ea: dict, eb: dict) -> bool:
    """Whether two encoder records (a manifest's `encoders.clip`, say) name the same encoder (module docstring)."""
    sa, sb = ea.get("weights_sha256"), eb.get("weights_sha256")
    if isinstance(sa, dict) and isinstance(sb, dict) and sa and sb:
        return _architecture(ea) == _architecture(eb) and sorted(sa.values()) == sorted(sb.values())
    if ea.get("weights") and eb.get("weights"):
        return (_architecture(ea), ea["weights"]) == (_architecture(eb), eb["weights"])
    return _spec(ea) == _spec(eb)


def precision_of(manifest: dict, kind: str) -> str | None:
    """fp32, bf16 or fp16: the dtype the encoder ran in, else the index's `precision`; None when neither says."""
    dtype = _PRECISION.get(str(_entry(manifest, kind).get("dtype") or "").replace("torch.", ""))
    named = manifest.get("precision")
    return dtype or (named.get("name") if isinstance(named, dict) else None)


def _shown(e: dict) -> str:
    return str(e.get("spec") or e.get("model") or "unknown")


def _told_apart(ea: dict, eb: dict) -> tuple[str, str]:
    """How to show two encoders that differ: their specs, and where those read alike, their weights (or the
    first checksums)."""
    a, b = _shown(ea), _shown(eb)
    if a != b:
        return a, b
    wa, wb = str(ea.get("weights") or ""), str(eb.get("weights") or "")
    if wa != wb:
        return f"{a} from {wa}", f"{b} from {wb}"

    def sums(e):
        return "/".join(v[:12] for v in sorted((e.get("weights_sha256") or {}).values())) or "unrecorded"

    return f"{a} with weights sha256 {sums(ea)}", f"{b} with weights sha256 {sums(eb)}"


def encoder_differences(ma: dict, mb: dict) -> list[tuple[str, str, str, str]]:
    """(clip or dino, what differs: encoder, width, precision or preprocessing, as in `ma`, as in `mb`) for each
    way the two manifests' encoders differ; [] when their vectors can be compared."""
    out = []
    for kind in KINDS:
        ea, eb = _entry(ma, kind), _entry(mb, kind)
        if not same_encoder(ea, eb):
            out.append((kind, "encoder", *_told_apart(ea, eb)))
        if ea.get("dim") is not None and eb.get("dim") is not None and ea["dim"] != eb["dim"]:
            out.append((kind, "width", f"{ea['dim']}", f"{eb['dim']}"))
        pa, pb = precision_of(ma, kind), precision_of(mb, kind)
        if pa and pb and pa != pb:
            out.append((kind, "precision", pa, pb))
        qa, qb = ea.get("preprocess"), eb.get("preprocess")
        if isinstance(qa, dict) and isinstance(qb, dict):
            # only what both records hold: a newer library records more of the same preprocessing
            keys = sorted(k for k in qa.keys() & qb.keys() if qa[k] != qb[k])
            if keys:
                out.append((kind, "preprocessing", f"{keys[0]} {qa[keys[0]]}", f"{keys[0]} {qb[keys[0]]}"))
    return out
