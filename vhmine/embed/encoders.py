"""The two image encoders: CLIP through open_clip and DINOv2 through transformers.

Each is given by name or local path (never fetched in tests) and loads into an `Encoder`:
the model on a device, the preprocessing it was trained with (as a picklable transform the
loader workers run), and a `describe()` record that the index manifest keeps, so what is
recorded is what actually ran (local weights with their files' checksums, `weights_sha256`, so an index
names its encoder whatever path it was given by). The weights are cast to one precision (fp32, bf16,
fp16: named, or measured by embed.precision); embeddings are L2-normalised float32 whatever it is: CLIP's
`encode_image` output, DINOv2's CLS token.

Spec syntax
- CLIP: `NAME:TAG` (open_clip built-in with a pretrained tag, e.g. `ViT-L-14:openai`),
  `NAME:/path/to/checkpoint.pt`, `local-dir:/folder` (open_clip_config.json + weights),
  `hf-hub:org/repo`.
- DINOv2: a hub id (`facebook/dinov2-large`) or a local folder saved with `save_pretrained`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vhmine.config import resolve_device
from vhmine.embed.backend import Backend
from vhmine.embed.backend import choose as choose_backend
from vhmine.embed.backend import requested as requested_backend
from vhmine.embed.precision import Choice, choose, torch_dtype
from vhmine.errors import EncoderError

log = logging.getLogger(__name__)

HUB_HOST = "huggingface.co"


# --- network: answer "can we reach the hub?" in seconds, not after 50 s of retries -------------

_reachable_cache: dict[tuple[str, int], bool] = {}


def _through_proxy(host: str, port: int) -> tuple[str, int]:
    """The proxy that a download of host:port would go through (HTTPS_PROXY / HTTP_PROXY, NO_PROXY), else host:port."""
    import urllib.request
    from urllib.parse import urlsplit

    proxy = urllib.request.getproxies().get("https" if port == 443 else "http")
    if not proxy or urllib.request.proxy_bypass(host):
        return host, port
    url = urlsplit(proxy if "//" in proxy else "//" + proxy)
    try:
        proxy_port = url.port
    except ValueError:
        proxy_port = None
    return url.hostname or host, proxy_port or (443 if url.scheme == "https" else 80)


def host_reachable(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    """True when a TCP connection to host:port, or to the proxy configured for it, opens within `timeout`
    seconds (DNS included). Behind a proxy the host itself is often unreachable while downloads work."""
    key = _through_proxy(host, port)
    if key in _reachable_cache:
        return _reachable_cache[key]
    ok = [False]

    def probe() -> None:
        try:
            with socket.create_connection(key, timeout=timeout):
                ok[0] = True
        except OSError:
            pass

    # getaddrinfo ignores socket timeouts, so the whole probe runs in a thread we stop waiting for.
    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout)
    _reachable_cache[key] = ok[0]
    return ok[0]


def hub_offline() -> bool:
    """Offline when the user says so (HF_HUB_OFFLINE) or the hub cannot be reached; then stay offline."""
    flag = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("TRANSFORMERS_OFFLINE")
    if flag and flag.lower() not in ("0", "false", "no"):
        return True
    if host_reachable(HUB_HOST):
        return False
    log.warning("%s is unreachable: loading models from local files and the HF cache only", HUB_HOST)
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:  # huggingface_hub reads the variable at import; if it is already imported, tell it too
        import sys

        if "huggingface_hub" in sys.modules:
            sys.modules["huggingface_hub"].constants.HF_HUB_OFFLINE = True
    except AttributeError:
        pass
    return True


# --- the loaded encoder ---------------------------------------------------------------------------


@dataclass
class Encoder:
    kind: str  # "clip" or "dino"
    spec: str
    model: Any  # torch.nn.Module in eval mode on `device`
    preprocess: Callable  # PIL RGB image -> float tensor (C, H, W); picklable for loader workers
    forward: Callable  # (model, batch on device) -> (B, dim) tensor
    dim: int
    device: Any
    dtype: Any
    info: dict = field(default_factory=dict)  # name, weights, preprocessing: goes into the manifest

    def encode(self, batch):
        """Embed a preprocessed batch; returns L2-normalised float32 rows on the CPU."""
        import torch

        with torch.inference_mode():
            # Move, then cast: torch casts a CPU->GPU copy on the CPU first, off the pinned buffer.
            x = batch.to(self.device, non_blocking=True).to(self.dtype)
            out = self.forward(self.model, x).float()
            out = torch.nn.functional.normalize(out, dim=-1)
        return out.cpu()

    def describe(self) -> dict:
        return {"kind": self.kind, "spec": self.spec, "dim": self.dim, **self.info}


def _clip_forward(model, x):
    return model.encode_image(x)


def _dino_forward(model, x):
    return model(pixel_values=x).last_hidden_state[:, 0]


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pth", ".pt")


def _weight_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in _WEIGHT_SUFFIXES)


def weights_sha256(files) -> dict[str, str]:
    """{file name: sha256} of the local files an encoder is made of (weights, config): the manifest's
    `weights_sha256`, by which vhmine.index knows one encoder under two paths, and a folder whose weights were
    replaced as another encoder. Hashed once per load (about a second per GB), only for local weights."""
    from vhmine.images import sha256_file

    return {Path(f).name: sha256_file(f) for f in files if Path(f).is_file()}


# --- CLIP ----------------------------------------------------------------------------------------


def parse_clip_spec(spec: str) -> tuple[str, str | None]:
    """Split an open_clip spec into (model_name, pretrained). Schemas keep the whole string."""
    if spec.startswith(("local-dir:", "hf-hub:")):
        return spec, None
    name, sep, tag = spec.partition(":")
    if not name:
        raise EncoderError(f"--clip-model {spec!r}: expected NAME:TAG, NAME:/path/to/checkpoint or local-dir:/folder")
    return name, (tag if sep else None)


def load_clip(spec: str, device=None, precision: str = "fp32") -> Encoder:
    """CLIP's image tower from `spec` on `device`, its weights cast to `precision` (fp32, bf16, fp16)."""
    name, pretrained = parse_clip_spec(spec)
    info: dict[str, Any] = {"library": "open_clip"}
    if name.startswith("local-dir:"):
        folder = Path(name[len("local-dir:") :])
        if not (folder / "open_clip_config.json").is_file():
            raise EncoderError(
                f"--clip-model {spec}: {folder}/open_clip_config.json not found (a local-dir: folder needs the config"
                " and the weights)"
            )
        weights = _weight_files(folder)
        if not weights:  # open_clip would only warn and carry on with random weights
            raise EncoderError(f"--clip-model {spec}: no weights (*.safetensors, *.bin, *.pth) in {folder}")
        info["weights"] = str(folder.resolve())
        info["weights_sha256"] = weights_sha256([*weights, folder / "open_clip_config.json"])
    elif pretrained is None and not name.startswith("hf-hub:"):
        raise EncoderError(
            f"--clip-model {spec}: no pretrained weights named; use NAME:TAG (e.g. ViT-L-14:openai), "
            "NAME:/path/to/checkpoint.pt or local-dir:/folder"
        )
    elif pretrained is not None and (os.sep in pretrained or Path(pretrained).suffix):
        if not Path(pretrained).is_file():
            raise EncoderError(f"--clip-model {spec}: checkpoint file {pretrained} not found")
        info["weights"] = str(Path(pretrained).resolve())
        info["weights_sha256"] = weights_sha256([Path(pretrained)])
    else:
        info["weights"] = pretrained or name
        if hub_offline():
            log.info("loading %s from the local cache only", spec)

    import open_clip

    kwargs: dict[str, Any] = {}
    if pretrained and not name.startswith(("local-dir:", "hf-hub:")):
        if name.replace("/", "-") not in open_clip.list_models():
            raise EncoderError(
                f"--clip-model {spec}: unknown open_clip model {name!r}; `python -c 'import open_clip;"
                " print(open_clip.list_models())'` lists them"
            )
        tag_cfg = open_clip.get_pretrained_cfg(name, pretrained) or {}
        # OpenAI's weights were trained with QuickGELU; plain ViT-L-14 config says otherwise.
        if tag_cfg.get("quick_gelu"):
            kwargs["force_quick_gelu"] = True
    dev = resolve_device(device) if not hasattr(device, "type") else device
    try:
        model, _, preprocess = open_clip.create_model_and_transforms(name, pretrained=pretrained, **kwargs)
    except Exception as err:  # open_clip raises RuntimeError/ValueError/OSError for all of these
        hint = ""
        if hub_offline():
            hint = (
                f" ({HUB_HOST} is unreachable: pass local weights with --clip-model NAME:/path/to/checkpoint.pt "
                "or local-dir:/folder, or download them first on a machine with network)"
            )
        raise EncoderError(f"could not load CLIP model {spec!r}: {err}{hint}") from err
    # The text tower is never used: drop it before moving the model to save device memory.
    for attr in ("transformer", "token_embedding", "text"):
        if isinstance(getattr(model, attr, None), __import__("torch").nn.Module):
            setattr(model, attr, None)
    dtype = torch_dtype(precision)
    model = model.to(dev, dtype=dtype).eval()
    info["model"] = name
    info["preprocess"] = dict(getattr(model.visual, "preprocess_cfg", {}) or {})
    info["preprocess_repr"] = repr(preprocess)
    dim = int(getattr(model.visual, "output_dim", 0) or model.visual.proj.shape[1])
    return Encoder("clip", spec, model, preprocess, _clip_forward, dim, dev, dtype, info)


# --- DINOv2 --------------------------------------------------------------------------------------


class HFImagePreprocess:
    """DINOv2's image processor (resize shortest edge, centre crop, rescale, normalise), done on PIL.

    Equal to transformers' BitImageProcessor output (tested), but faster and picklable; the crop
    offset follows transformers ((h - crop) // 2), not torchvision's rounding.
    """

    def __init__(self, cfg: dict):
        self.cfg = cfg
        size = cfg.get("size") or {}
        self.shortest = size.get("shortest_edge") if cfg.get("do_resize", True) else None
        if cfg.get("do_resize", True) and self.shortest is None:
            raise EncoderError(f"DINOv2 processor size {size!r} is not supported (expected shortest_edge)")
        crop = cfg.get("crop_size") or {}
        self.crop = (crop["height"], crop["width"]) if cfg.get("do_center_crop", True) else None
        self.resample = int(cfg.get("resample", 3))
        self.scale = float(cfg.get("rescale_factor", 1 / 255)) if cfg.get("do_rescale", True) else 1.0
        self.mean = cfg.get("image_mean") if cfg.get("do_normalize", True) else None
        self.std = cfg.get("image_std")

    def __call__(self, img):
        import numpy as np
        import torch

        if self.shortest:
            w, h = img.size
            short, long = (w, h) if w <= h else (h, w)
            new_short, new_long = self.shortest, int(self.shortest * long / short)
            size = (new_short, new_long) if w <= h else (new_long, new_short)
            if size != (w, h):
                img = img.resize(size, resample=self.resample)
        if self.crop:
            ch, cw = self.crop
            w, h = img.size
            top, left = (h - ch) // 2, (w - cw) // 2
            img = img.crop((left, top, left + cw, top + ch))  # PIL pads with black if the crop overhangs
        # numpy, not torch: tiny torch ops pay thread-pool wake-ups that cost more than the maths.
        x = np.asarray(img, dtype=np.float32) * np.float32(self.scale)
        if self.mean is not None:
            x = (x - np.asarray(self.mean, np.float32)) / np.asarray(self.std, np.float32)
        return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))

    def __repr__(self) -> str:
        return f"HFImagePreprocess(shortest_edge={self.shortest}, crop={self.crop}, resample={self.resample})"


def load_dino(spec: str, device=None, precision: str = "fp32") -> Encoder:
    """DINOv2 from `spec` (a hub id or a save_pretrained folder) on `device`, its weights cast to `precision`."""
    local = Path(spec).expanduser()
    is_local = local.exists()
    if is_local and not (local / "config.json").is_file():
        raise EncoderError(
            f"--dino-model {spec}: {local}/config.json not found (expected a folder saved with save_pretrained)"
        )
    offline = (not is_local) and hub_offline()

    from transformers import AutoConfig, AutoImageProcessor, AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a per-tensor "Loading weights" bar for every load is noise

    source = str(local) if is_local else spec
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=offline or is_local)
        processor = AutoImageProcessor.from_pretrained(source, local_files_only=offline or is_local)
        model = AutoModel.from_pretrained(source, local_files_only=offline or is_local)
    except Exception as err:  # OSError / ValueError from transformers
        hint = ""
        if offline:
            hint = (
                f" ({HUB_HOST} is unreachable: pass a local folder saved with save_pretrained as --dino-model, "
                "or download the model first on a machine with network)"
            )
        raise EncoderError(f"could not load DINOv2 model {spec!r}: {err}{hint}") from err
    if getattr(config, "model_type", "") not in ("dinov2", "dinov2_with_registers"):
        log.warning("--dino-model %s is a %r model, not DINOv2; using its CLS token anyway", spec, config.model_type)
    dev = resolve_device(device) if not hasattr(device, "type") else device
    dtype = torch_dtype(precision)
    model = model.to(dev, dtype=dtype).eval()
    pp_cfg = processor.to_dict()
    pp_cfg = {k: v for k, v in pp_cfg.items() if not k.startswith("_")}
    info = {
        "library": "transformers",
        "model": config.model_type,
        "weights": str(local.resolve()) if is_local else spec,
        **({"weights_sha256": weights_sha256(_weight_files(local) + [local / "config.json"])} if is_local else {}),
        "preprocess": {
            k: pp_cfg.get(k)
            for k in (
                "do_resize",
                "size",
                "resample",
                "do_center_crop",
                "crop_size",
                "do_rescale",
                "rescale_factor",
                "do_normalize",
                "image_mean",
                "image_std",
            )
        },
    }
    preprocess = HFImagePreprocess(pp_cfg)
    info["preprocess_repr"] = repr(preprocess)
    return Encoder("dino", spec, model, preprocess, _dino_forward, int(config.hidden_size), dev, dtype, info)


# --- both encoders: a batch in, two vector arrays out ---------------------------------------------


@dataclass
class EncoderPair:
    """CLIP and DINOv2 loaded once, side by side, in one precision: what one embed worker (process or Ray
    actor) holds."""

    clip: Encoder
    dino: Encoder
    precision: Choice
    backend: Backend | None = None  # the runtime (embed.backend); None: torch, not chosen

    @property
    def dims(self) -> tuple[int, int]:
        return self.clip.dim, self.dino.dim

    def encode(self, clip_batch, dino_batch):
        """Two preprocessed batches of the same images -> two (B, dim) float32 numpy arrays."""
        return self.clip.encode(clip_batch).numpy(), self.dino.encode(dino_batch).numpy()

    def describe(self) -> dict:
        """What the manifest records: each encoder's spec, dims, weights, preprocessing and dtype as run."""
        out = {}
        for kind, enc in (("clip", self.clip), ("dino", self.dino)):
            out[kind] = {**enc.describe(), "dtype": str(enc.dtype).replace("torch.", "")}
        return out


def load_pair(
    clip_spec: str,
    dino_spec: str,
    device=None,
    precision: str = "auto",
    *,
    kept: bool = False,
    backend: str | None = "torch",
) -> EncoderPair:
    """Both encoders on `device` in `precision` (fp32, bf16, fp16, or auto: measured, embed.precision);
    kept: the precision is an index's own (recorded so); backend: the runtime (torch, openvino, or auto:
    measured, embed.backend; None: VHMINE_EMBED_BACKEND, else auto)."""
    dev = resolve_device(device) if not hasattr(device, "type") else device
    clip, dino = load_clip(clip_spec, dev), load_dino(dino_spec, dev)  # fp32, as stored: then cast once
    choice = choose((clip, dino), dev, precision, source="index" if kept else "forced")
    runtime = choose_backend((clip, dino), dev, requested_backend(backend), choice.name)
    return EncoderPair(clip, dino, choice, runtime)
