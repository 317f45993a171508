"""Stage 6, generate: a text-to-image model renders new images from each mode's description.

Reads the newest merged description of each mode from the curation store (or user-edited copies:
`<folder>/<mode>.txt` with `descriptions.json`, as `vhmine describe --out` writes them); for any
backend but DALL-E-3 an LLM first rewrites the description into a concrete image prompt (prompt file
`image_prompt`, both texts kept). Writes each image once, as `<out>/<sha256>.png`, and records it
through curate.work.add_generation (prompt, backend, model, seed, description id and the parameters), which
queues it in its mode for workers. Backends (one resolver, `parse_backend`):

- ``openai:<model>``: an OpenAI-compatible image endpoint (`dall-e-3`, `gpt-image-1`, ...), via vhmine.llm
  (cached: a rerun asks nothing again);
- ``diffusers:<hub id or local folder>``: a diffusers pipeline (Stable Diffusion, SDXL, ...), on
  `device` with `dtype`, `steps`, `guidance`; image k of a mode uses seed `seed + k`, and an image
  whose (mode, prompt, seed, steps, guidance, width, height) is already recorded is not rendered again.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vhmine import prompts as P
from vhmine import rules as R
from vhmine.errors import InputError
from vhmine.files import atomic_write, check_writable
from vhmine.llm import LLM, ChatRequest, ImageRequest, LLMOptions

log = logging.getLogger(__name__)

BACKENDS = ("openai", "diffusers")
DEFAULT_OUT = Path("data") / "generated"


@dataclass(frozen=True)
class Backend:
    kind: str  # "openai" or "diffusers"
    model: str  # the image model name, hub id or folder

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.model}"

    @property
    def needs_rewrite(self) -> bool:
        """DALL-E-3 takes the description itself (it rewrites prompts on its own); others need a prompt."""
        return not (self.kind == "openai" and self.model == "dall-e-3")


def parse_backend(spec: str) -> Backend:
    kind, sep, model = (spec or "").partition(":")
    if not sep or kind not in BACKENDS or not model.strip():
        raise InputError(
            f"unknown backend {spec!r}: use openai:<image model> (e.g. openai:dall-e-3, openai:gpt-image-1) "
            "or diffusers:<hub id or local folder> (e.g. diffusers:stabilityai/sdxl-turbo)"
        )
    if kind == "diffusers" and os.path.isdir(os.path.expanduser(model)):
        model = str(Path(model).expanduser().resolve())  # a folder is recorded by its absolute path
    return Backend(kind, model.strip())


@dataclass(frozen=True)
class GenerateOptions:
    backend: str
    llm: LLMOptions  # the endpoint; `llm.model` rewrites descriptions into image prompts
    per_mode: int = 10
    modes: Sequence[str] | None = None
    descriptions: Path | None = None  # folder of edited <mode>.txt; None: the store's newest
    out: Path | None = None  # image folder; None: data/generated
    size: str = "1024x1024"  # openai backends
    device: str | None = None  # diffusers: None -> cuda when present
    dtype: str | None = None  # diffusers: float32, float16, bfloat16; None -> float16 on cuda
    steps: int = 30
    guidance: float = 7.5
    seed: int = 0
    width: int | None = None  # diffusers; None: the pipeline's default
    height: int | None = None


@dataclass
class Made:
    mode: str
    index: int
    status: str  # "generated", "existing", or an error status
    task_id: str | None = None
    image_id: str | None = None
    prompt: str = ""
    reason: str = ""


@dataclass
class GenerateResult:
    backend: str
    items: list[Made] = field(default_factory=list)
    spent: float = 0.0
    out: Path | None = None

    @property
    def failed(self) -> list[Made]:
        return [m for m in self.items if m.status not in ("generated", "existing")]

    @property
    def partial(self) -> bool:
        return bool(self.failed)

    def summary(self) -> str:
        lines = [
            f"generate with {self.backend}: {len(self.items)} images asked, ${self.spent:.4f} spent; images in"
            f" {self.out}"
        ]
        for mode in R.mode_names():
            its = [m for m in self.items if m.mode == mode]
            if its:
                new = sum(m.status == "generated" for m in its)
                old = sum(m.status == "existing" for m in its)
                lines.append(f"  {mode:<12} {new} new, {old} already there, {len(its) - new - old} failed")
        for m in self.failed[:20]:
            lines.append(f"  failed: {m.mode} #{m.index}: {m.status}: {m.reason}")
        if self.partial:
            lines.append(
                f"partial run: {len(self.failed)} image(s) not made; rerun the same command to retry only those"
            )
        return "\n".join(lines)


def _descriptions(store, opts: GenerateOptions, modes: list[str]) -> dict[str, tuple[str | None, str, bool]]:
    """mode -> (description id, text, edited?) for every mode that has one."""
    from vhmine.models.describe import latest_descriptions, read_manifest

    if opts.descriptions is None:
        return {m: (did, text, False) for m, (did, text) in latest_descriptions(store, modes).items()}
    folder = Path(opts.descriptions)
    manifest = read_manifest(folder)
    ids = [d for d in ((manifest.get(m) or {}).get("description_id") for m in modes) if d]
    originals = _description_texts(store, ids)  # the folder's own descriptions, which need not be the newest
    out = {}
    for m in modes:
        f = folder / f"{m}.txt"
        if not f.is_file():
            continue
        text = f.read_text(encoding="utf-8").strip()
        if not text:
            raise InputError(f"{f} is empty: write the description, or delete the file to skip mode {m}")
        did = (manifest.get(m) or {}).get("description_id")
        if did and did not in originals:  # a folder from another store: keep the text, not a dangling id
            log.warning(
                "description %s of %s is not in the store %s: recorded without a description id",
                did,
                f,
                store.display_url,
            )
            did = None
        original = originals.get(did) if did else None
        out[m] = (did, text, original is None or original.strip() != text)
    return out


def _description_texts(store, ids: Sequence[str]) -> dict[str, str]:
    """description id -> its text, for the ids the store holds."""
    from vhmine import curate

    return curate.stages.description_texts(store, ids)


def _save_png(png: bytes, folder: Path) -> tuple[Path, bool]:
    """`<folder>/<sha256>.png`, written once (temp file and rename), and whether it was new (no file of these bytes
    was there: a model that draws the same picture twice adds one image); PNG re-encoded if it is not one, as
    the export formats re-encode (vhmine.images.encode_as: a CMYK or 16-bit picture too)."""
    if not png.startswith(b"\x89PNG"):
        from vhmine.images import encode_as

        png = encode_as(png, "PNG")
    sha = hashlib.sha256(png).hexdigest()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{sha}.png"
    if path.exists():
        return path, False
    atomic_write(path, lambda tmp: tmp.write_bytes(png))
    return path, True


RENDER_KEYS = ("steps", "guidance", "width", "height")  # diffusers settings that change the picture


def _render_key(mode: str, prompt: str, seed: int | None, params: dict) -> tuple:
    return (mode, prompt, seed) + tuple((params or {}).get(k) for k in RENDER_KEYS)


def _recorded(store, backend: Backend) -> set[tuple]:
    """`_render_key`s of the images this backend and model already made."""
    from vhmine import curate

    return {
        _render_key(m, p, seed, params)
        for m, p, seed, params in curate.stages.recorded_renders(store, backend.kind, backend.model)
    }


class _Diffusers:
    """One pipeline, loaded once, rendering one image per call."""

    def __init__(self, source: str, opts: GenerateOptions):
        try:
            import torch
            from diffusers import DiffusionPipeline
        except ModuleNotFoundError as err:
            raise InputError(f"the diffusers backend needs {err.name}: pip install 'vhmine[generate]'") from None
        self.torch = torch
        self.device = opts.device or ("cuda" if torch.cuda.is_available() else "cpu")
        dtype_name = opts.dtype or ("float16" if self.device.startswith("cuda") else "float32")
        if dtype_name not in ("float32", "float16", "bfloat16"):
            raise InputError(f"--dtype {dtype_name!r} is not one of float32, float16, bfloat16")
        try:
            with (
                warnings.catch_warnings()
            ):  # newer diffusers rename torch_dtype to dtype; older ones know only torch_dtype
                warnings.filterwarnings("ignore", message=".*torch_dtype.*", category=FutureWarning)
                self.pipe = DiffusionPipeline.from_pretrained(source, torch_dtype=getattr(torch, dtype_name))
        except Exception as err:
            raise InputError(
                f"cannot load diffusers pipeline {source!r} ({type(err).__name__}: {str(err)[:300]}): give a "
                "folder saved with save_pretrained, or a hub id that is downloaded (HF_HUB_OFFLINE blocks "
                "downloads)"
            ) from None
        self.pipe.to(self.device)
        self.pipe.set_progress_bar_config(disable=True)
        self.dtype = dtype_name
        self.opts = opts

    def params(self) -> dict:
        o = self.opts
        return {
            "device": self.device,
            "dtype": self.dtype,
            "steps": o.steps,
            "guidance": o.guidance,
            "width": o.width,
            "height": o.height,
            "pipeline": type(self.pipe).__name__,
        }

    def render(self, prompt: str, seed: int) -> bytes:
        gen = self.torch.Generator(device="cpu").manual_seed(seed)  # CPU generator: same image on any device
        kw = {k: v for k, v in (("width", self.opts.width), ("height", self.opts.height)) if v}
        img = self.pipe(
            prompt, num_inference_steps=self.opts.steps, guidance_scale=self.opts.guidance, generator=gen, **kw
        ).images[0]
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        return buf.getvalue()


def generate(store, opts: GenerateOptions) -> GenerateResult:
    """Render `per_mode` images for each mode that has a description; queue them for curation."""
    from tqdm.auto import tqdm

    from vhmine import curate as C

    backend = parse_backend(opts.backend)
    if opts.per_mode < 1:
        raise InputError("--per-mode must be at least 1")
    check_writable(Path(opts.out or DEFAULT_OUT), flag="--out")  # before any model is asked, in one line
    modes = R.selected_modes(opts.modes)
    descs = _descriptions(store, opts, modes)
    missing = [m for m in modes if m not in descs]
    if len(missing) == len(modes):
        raise InputError(
            f"no description for {', '.join(missing)}: run `vhmine describe` first"
            + (f", or put <mode>.txt files in {opts.descriptions}" if opts.descriptions else "")
        )
    if missing:
        log.warning("no description for %s: skipped (run `vhmine describe --mode MODE`)", ", ".join(missing))
    out_dir = Path(opts.out or DEFAULT_OUT)
    result = GenerateResult(backend.spec, out=out_dir.resolve())
    p_img = P.load("image_prompt")
    jobs = [(m, k) for m in modes if m in descs for k in range(opts.per_mode)]
    with LLM(opts.llm) as llm:
        llm.check_prices(
            ([opts.llm.model] if backend.needs_rewrite else []) + ([backend.model] if backend.kind == "openai" else [])
        )
        # 1. the image prompts (LLM-rewritten, cached) for every (mode, k)
        prompts: dict[tuple[str, int], str] = {}
        if backend.needs_rewrite:
            reqs = [
                ChatRequest(
                    p_img.render(mode=m, definition=R.get_mode(m).definition, description=descs[m][1], variant=k + 1),
                    params={"temperature": 1.0},
                )
                for m, k in jobs
            ]
            for o in llm.chat_iter(reqs, desc="image prompts"):
                m, k = jobs[o.index]
                if o.ok:
                    prompts[(m, k)] = " ".join(o.answer.text.split()).strip('"')
                else:
                    result.items.append(Made(m, k, o.status, reason=f"prompt rewrite failed: {o.reason}"))
            llm.raise_if_stopped(f"generate's prompt rewriting with {opts.llm.model}")
        else:
            prompts = {(m, k): descs[m][1] for m, k in jobs}

        def record(m: str, k: int, png: bytes, prompt: str, seed: int | None, params: dict) -> Made:
            path, fresh = _save_png(png, out_dir)
            did, text, edited = descs[m]
            params = dict(params, description_edited=edited)
            if edited:
                params["description_text"] = text
            if backend.needs_rewrite:
                params.update(rewrite_model=opts.llm.model, rewrite_prompt=p_img.id, variant=k + 1)
            tid = C.work.add_generation(
                store,
                path,
                m,
                prompt,
                backend=backend.kind,
                model=backend.model,
                seed=seed,
                description_id=did,
                params=params,
            )
            # the same bytes as an image already there (this run's or an earlier one's): stored once, counted so
            return Made(m, k, "generated" if fresh else "existing", tid, path.stem[:16], prompt)

        todo = [j for j in jobs if j in prompts]
        # 2. the images
        if backend.kind == "openai":
            ireqs = [ImageRequest(prompts[j], model=backend.model, size=opts.size, variant=j[1]) for j in todo]
            for o in llm.image_iter(ireqs, desc=f"images {backend.model}"):
                m, k = todo[o.index]
                if not o.ok:
                    result.items.append(Made(m, k, o.status, prompt=prompts[(m, k)], reason=o.reason))
                    continue
                made = record(
                    m,
                    k,
                    o.answer.png,
                    prompts[(m, k)],
                    None,
                    {"size": opts.size, "revised_prompt": o.answer.revised_prompt},
                )
                if o.answer.cached:
                    made.status = "existing"
                result.items.append(made)
            llm.raise_if_stopped(f"generate with {backend.model}")  # no key, a rejected one: one line
        elif todo:
            done = _recorded(store, backend)
            settings = {"steps": opts.steps, "guidance": opts.guidance, "width": opts.width, "height": opts.height}
            left = [j for j in todo if _render_key(j[0], prompts[j], opts.seed + j[1], settings) not in done]
            result.items += [Made(m, k, "existing", prompt=prompts[(m, k)]) for m, k in todo if (m, k) not in left]
            if left:
                pipe = _Diffusers(backend.model, opts)
                for m, k in tqdm(left, desc=f"render {Path(backend.model).name}", unit="img", leave=False):
                    seed = opts.seed + k
                    try:
                        png = pipe.render(prompts[(m, k)], seed)
                    except Exception as err:  # one bad prompt (e.g. NaNs at fp16) does not stop the run
                        result.items.append(
                            Made(
                                m, k, "error", prompt=prompts[(m, k)], reason=f"{type(err).__name__}: {str(err)[:200]}"
                            )
                        )
                        continue
                    result.items.append(record(m, k, png, prompts[(m, k)], seed, pipe.params()))
        result.spent = llm.spent
    order = {m: i for i, m in enumerate(R.mode_names())}
    result.items.sort(key=lambda x: (order[x.mode], x.index))
    return result
