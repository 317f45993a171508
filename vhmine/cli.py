"""The `vhmine` command line: one verb per pipeline stage, each a thin wrapper over one library call.

Commands parse their options, call the library and turn a VhmineError into a message and exit
status 2. Nothing heavy is imported here, so `vhmine --help` is instant.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import List, Optional

import typer

from .config import DEFAULT_CLIP_MIN, DEFAULT_CLIP_MODEL, DEFAULT_DINO_MAX, DEFAULT_DINO_MODEL
from .errors import InputError, VhmineError

app = typer.Typer(
    name="vhmine",
    help="Mine visual-hallucination test cases for multi-modal LLMs and turn them into benchmarks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts are plain: rich markup would eat "[default: ...]" and "[env ...]"
)
data_app = typer.Typer(help="Download and verify public image collections.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(data_app, name="data")

IndexesOpt = typer.Option(None, "--indexes", help="Folder that holds the indexes [env VHMINE_INDEXES; default ./indexes].")


def _fail(err: Exception) -> None:
    typer.echo(f"error: {err}", err=True)
    raise typer.Exit(2)


@app.callback()
def _main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug details.")) -> None:
    # Other libraries stay at WARNING; vhmine's own progress notes show at INFO.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    logging.getLogger("vhmine").setLevel(logging.DEBUG if verbose else logging.INFO)


@app.command()
def embed(
    images: str = typer.Argument(..., help="Folder of images (searched recursively: jpg, jpeg, png, webp), or WebDataset .tar shards: a .tar, a folder of them, or an fsspec URL."),
    name: Optional[str] = typer.Option(None, "--name", help="Collection name [default: the folder's name]."),
    coco_annotations: Optional[Path] = typer.Option(None, "--coco-annotations", help="COCO instances JSON: keep COCO ids and object categories."),
    clip_model: str = typer.Option(DEFAULT_CLIP_MODEL, "--clip-model", help="open_clip NAME:PRETRAINED, NAME:/path/to/checkpoint, or local-dir:/folder."),
    dino_model: str = typer.Option(DEFAULT_DINO_MODEL, "--dino-model", help="DINOv2 hub id or local folder (transformers format)."),
    indexes: Optional[Path] = IndexesOpt,
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda, cuda:1 ... [default: cuda when present]."),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Images per encoder forward pass."),
    workers: Optional[int] = typer.Option(None, "--workers", min=0, help="Image-decoding worker processes [default: 0 on a small CPU machine, up to 16 with a GPU]."),
    shard_size: int = typer.Option(1024, "--shard-size", min=1, help="Images per resumable shard."),
    max_pixels: int = typer.Option(89_478_485, "--max-pixels", min=1, help="Skip images larger than this (decompression-bomb guard)."),
    engine: str = typer.Option("local", "--engine", help="local (this process) or ray (a Ray cluster: pip install 'vhmine[ray]')."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Ray cluster address [default: RAY_ADDRESS, a running local cluster, else a new local one]."),
    ray_actors: Optional[int] = typer.Option(None, "--ray-actors", min=1, help="Ray actors [default: one per GPU of the cluster; one per CPU where it has none]."),
) -> None:
    """Embed an image collection with CLIP and DINOv2 into FAISS indexes (resumable)."""
    from .embed import EmbedOptions, embed_collection

    opts = EmbedOptions(
        images=images, name=name, coco_annotations=coco_annotations, clip_model=clip_model,
        dino_model=dino_model, indexes=indexes, device=device, batch_size=batch_size,
        workers=workers, shard_size=shard_size, max_pixels=max_pixels, engine=engine, ray_address=ray_address,
        ray_actors=ray_actors,
    )
    try:
        result = embed_collection(opts)
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())


@app.command()
def mine(
    index: Optional[str] = typer.Option(None, "--index", help="Index name [default: VHMINE_INDEX, or the only one there is]."),
    clip: float = typer.Option(DEFAULT_CLIP_MIN, "--clip", help="Keep pairs with CLIP cosine >= this."),
    dino: float = typer.Option(DEFAULT_DINO_MAX, "--dino", help="Keep pairs with DINOv2 cosine <= this."),
    max_pairs: Optional[int] = typer.Option(None, "--max-pairs", min=1, help="Keep only the top pairs by gap."),
    max_per_image: Optional[int] = typer.Option(None, "--max-per-image", min=1, help="At most this many pairs per image."),
    out: Optional[Path] = typer.Option(None, "--out", help="Run folder [default: runs/<index>-clip<C>-dino<D>]."),
    indexes: Optional[Path] = IndexesOpt,
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda ... [default: cuda when present; cpu per Ray tile]."),
    gallery_size: int = typer.Option(100, "--gallery-size", min=0, help="Pairs shown in gallery.html."),
    engine: str = typer.Option("local", "--engine", help="local: this machine; ray: one Ray task per tile of the upper triangle (pip install 'vhmine[ray]')."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Ray cluster to join, e.g. HEAD:6379 [default: RAY_ADDRESS, or a new local cluster]."),
    tile_memory: float = typer.Option(1024, "--tile-memory", min=0.01, help="MiB of working memory per Ray tile; sets the tile size (1024 MiB: 15,680 rows at 768 dims)."),
) -> None:
    """Find image pairs that CLIP calls alike and DINOv2 calls different."""
    from .mine import MineOptions, mine_index

    opts = MineOptions(
        index=index, clip=clip, dino=dino, max_pairs=max_pairs, max_per_image=max_per_image,
        out=out, indexes=indexes, device=device, gallery_size=gallery_size,
        engine=engine, ray_address=ray_address, tile_memory=int(tile_memory * 2**20),
    )
    try:
        result = mine_index(opts)
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())


@app.command()
def demo(
    limit: int = typer.Option(500, "--limit", min=2, help="Images to embed when COCO can be downloaded."),
    offline: bool = typer.Option(False, "--offline", help="Skip the download attempt: shipped photos and tiny local encoders."),
    workdir: Path = typer.Option(Path("."), "--workdir", help="Where data/, indexes/ and runs/ go."),
) -> None:
    """Embed and mine a small collection end to end, then write the pairs and the gallery."""
    from .demo import run_demo

    try:
        result = run_demo(limit=limit, offline=offline, workdir=workdir)
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())


@data_app.command("coco")
def data_coco(
    split: str = typer.Option("val2017", "--split", help="train2017, val2017 or test2017."),
    dest: Path = typer.Option(Path("data/coco"), "--dest", help="Where the images and annotations go."),
    annotations: bool = typer.Option(True, "--annotations/--no-annotations", help="Also fetch the instances JSON."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="Mirror to download from [env VHMINE_COCO_URL]."),
) -> None:
    """Download COCO images (and annotations), verify checksums, unpack."""
    from .data import download_coco

    try:
        result = download_coco(split, dest, annotations=annotations, base_url=base_url)
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())


# --- curation store: seed, workers, curate (vhmine.seed, vhmine.curate, vhmine/apps/curate.py) -------------

DbOpt = typer.Option(None, "--db", help="Store: SQLAlchemy URL or SQLite file [env VHMINE_DB; default data/vhmine.db].")
workers_app = typer.Typer(help="Workers who annotate in the curation app.", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(workers_app, name="workers")


@app.command()
def seed(
    pairs: Path = typer.Option(..., "--pairs", help="runs/<run>/pairs.parquet written by `vhmine mine`."),
    per_mode: int = typer.Option(100, "--per-mode", min=1, help="Pairs queued for each of the 8 modes."),
    mode: Optional[List[str]] = typer.Option(None, "--mode", help="Queue only this mode (repeatable) [default: all 8]."),
    db: Optional[str] = DbOpt,
) -> None:
    """Load mined pairs into the store and queue initial-instance tasks per mode."""
    try:
        from .seed import seed_pairs
        from .store import open_store

        with open_store(db) as store:
            result = seed_pairs(store, pairs, per_mode=per_mode, modes=mode or None)
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())


@workers_app.command("add")
def workers_add(
    name: str = typer.Argument(..., help="Worker name (letters, digits, '.', '_', '-')."),
    admin: bool = typer.Option(False, "--admin", help="May see the agreement page."),
    db: Optional[str] = DbOpt,
) -> None:
    """Add a worker and print their sign-in token (shown once; only its hash is stored)."""
    try:
        from .curate import add_worker
        from .store import open_store

        with open_store(db) as store:
            token = add_worker(store, name, admin=admin)
    except VhmineError as err:
        _fail(err)
    typer.echo(f"worker {name} added{' (admin)' if admin else ''}; sign-in token (shown only now, keep it secret):", err=True)
    typer.echo(token)


@workers_app.command("list")
def workers_list(db: Optional[str] = DbOpt) -> None:
    """List workers (names and roles; tokens are never shown)."""
    try:
        from .curate import list_workers
        from .store import open_store

        with open_store(db) as store:
            workers = list_workers(store)
    except VhmineError as err:
        _fail(err)
    for w in workers:
        typer.echo(f"{w.name}\t{'admin' if w.is_admin else 'worker'}\t{'active' if w.active else 'inactive'}")


def _on_store(db: Optional[str], action: str, *args):
    """`vhmine.curate.<action>(store, *args)` on the opened store; a VhmineError ends the command with its message."""
    try:
        from . import curate
        from .store import open_store

        with open_store(db) as store:
            return getattr(curate, action)(store, *args)
    except VhmineError as err:
        _fail(err)


WorkerArg = typer.Argument(..., help="Worker name (as `vhmine workers list` shows it).")


@workers_app.command("rotate")
def workers_rotate(name: str = WorkerArg, db: Optional[str] = DbOpt) -> None:
    """Give a worker a new token and print it (shown once); the old one, and every browser signed in with it, stop working now."""
    token = _on_store(db, "rotate_token", name)
    typer.echo(f"worker {name}: new sign-in token (shown only now, keep it secret); the old one no longer works:", err=True)
    typer.echo(token)


@workers_app.command("deactivate")
def workers_deactivate(name: str = WorkerArg, db: Optional[str] = DbOpt) -> None:
    """Stop a worker: their token no longer signs in, and a browser signed in is signed out at its next action."""
    _on_store(db, "deactivate_worker", name)
    typer.echo(f"worker {name} deactivated; what they saved stays (`vhmine workers activate {name}` lets them back in)")


@workers_app.command("activate")
def workers_activate(name: str = WorkerArg, db: Optional[str] = DbOpt) -> None:
    """Let a deactivated worker sign in again with their token."""
    _on_store(db, "activate_worker", name)
    typer.echo(f"worker {name} active")


@app.command()
def curate(
    db: Optional[str] = DbOpt,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to serve on (0.0.0.0 to let other machines in)."),
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="Port to serve on."),
    app_path: Optional[Path] = typer.Option(None, "--app", help="The Streamlit script [default: the app inside the vhmine package]."),
) -> None:
    """Start the curation app (Streamlit) on the store."""
    try:
        from .curate import run_app

        rc = run_app(db=db, host=host, port=port, app_path=app_path)
    except VhmineError as err:
        _fail(err)
    raise typer.Exit(rc)


# --- asking models: probe, describe, generate (vhmine.llm, vhmine.probe, vhmine.describe, vhmine.generate) ---

PARTIAL_EXIT = 3  # the run finished but some items failed (listed in the summary): rerun to retry them
BaseUrlOpt = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 [env OPENAI_BASE_URL; default OpenAI]. The key comes from OPENAI_API_KEY only.")
ConcurrencyOpt = typer.Option(4, "--concurrency", min=1, help="Requests in flight at once.")
TimeoutOpt = typer.Option(60.0, "--timeout", min=0.1, help="Seconds before one request is abandoned (and retried).")
RetriesOpt = typer.Option(4, "--max-retries", min=0, help="Retries per request on 429, 5xx, time-outs and unreadable answers.")
RetryWaitOpt = typer.Option(1.0, "--retry-wait", min=0.0, help="First back-off in seconds; doubled each retry (max 30 s), with jitter.")
MaxCostOpt = typer.Option(None, "--max-cost", min=0.0, help="Stop cleanly before spending more than this many USD (from token usage and the price table).")
PricesOpt = typer.Option(None, "--prices", help='JSON file overriding the price table: {"model": {"input": USD/1M tokens, "output": ..., "image": USD/image}}.')
CacheOpt = typer.Option(None, "--cache", help="Request cache (SQLite): answers kept so reruns cost nothing [env VHMINE_LLM_CACHE; default data/llm-cache.db].")
MaxTokensOpt = typer.Option(512, "--max-tokens", min=1, help="Most tokens a model may write per answer.")
ModesOpt = typer.Option(None, "--mode", help="Only this mode (repeatable) [default: all 8].")


def _llm_options(model: str, base_url, concurrency, timeout, max_retries, retry_wait, max_cost, prices, cache,
                 max_tokens=512):
    from .llm import LLMOptions

    return LLMOptions(model=model, base_url=base_url, concurrency=concurrency, timeout_s=timeout,
                      max_retries=max_retries, retry_wait_s=retry_wait, max_cost=max_cost, prices=prices,
                      cache=cache, max_tokens=max_tokens)


def _finish(result) -> None:
    typer.echo(result.summary())
    if result.partial:
        raise typer.Exit(PARTIAL_EXIT)


@app.command()
def probe(
    model: str = typer.Option(..., "--model", help="The victim MLLM, as the endpoint names it (e.g. gpt-4o)."),
    judge: Optional[str] = typer.Option(None, "--judge", help="Model that judges open-ended answers (correct / incorrect / unclear) [default: none, workers label them in the app]."),
    rule: str = typer.Option("vhtest", "--rule", help="Yes/no rule for YNQ answers: vhtest (VHTest: the letters yes / no start it), firstword, pope, strict."),
    mode: Optional[List[str]] = ModesOpt,
    kind: Optional[List[str]] = typer.Option(None, "--kind", help="Only OEQ or YNQ instances (repeatable; any case) [default: both]."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Ask at most this many instances."),
    base_url: Optional[str] = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: Optional[float] = MaxCostOpt,
    prices: Optional[Path] = PricesOpt,
    cache: Optional[Path] = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Ask a victim MLLM every ready instance, judge the answers, print hallucinations per mode (exit 3: partial)."""
    try:
        from .probe import ProbeOptions, check_kinds, probe as run_probe
        from .store import open_store

        opts = ProbeOptions(llm=_llm_options(model, base_url, concurrency, timeout, max_retries, retry_wait, max_cost,
                                             prices, cache, max_tokens),
                            judge=judge, rule=rule, modes=mode or None, kinds=check_kinds(kind or ["OEQ", "YNQ"]),
                            limit=limit)
        with open_store(db) as store:
            result = run_probe(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


@app.command()
def describe(
    model: str = typer.Option(..., "--model", help="The MLLM that explains the hallucinations (e.g. gpt-4o)."),
    modes: str = typer.Option("all", "--modes", help="Comma-separated modes, or all."),
    mode: Optional[List[str]] = ModesOpt,
    examples: int = typer.Option(10, "--examples", min=1, help="Successes explained and merged per mode."),
    min_real: int = typer.Option(3, "--min-real", min=0, help="With fewer real successes, hypothetical ones fill up to --examples (marked so)."),
    victim: Optional[str] = typer.Option(None, "--victim", help="Use only the successes of this probed model [default: any model's]."),
    out: Optional[Path] = typer.Option(None, "--out", help="Also write <mode>.txt files here to edit before `vhmine generate --descriptions`."),
    base_url: Optional[str] = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: Optional[float] = MaxCostOpt,
    prices: Optional[Path] = PricesOpt,
    cache: Optional[Path] = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Write one description per mode of what makes it hallucinate, from the successes (exit 3: partial)."""
    try:
        from .describe import DescribeOptions, describe as run_describe
        from .store import open_store

        chosen = None if modes.strip().lower() == "all" else [m.strip() for m in modes.split(",") if m.strip()]
        if mode:  # the repeatable --mode of the other stages means the same here
            if chosen is not None:
                raise InputError("give the modes either as --modes a,b or as repeated --mode, not both")
            chosen = list(mode)
        opts = DescribeOptions(llm=_llm_options(model, base_url, concurrency, timeout, max_retries, retry_wait, max_cost,
                                                prices, cache, max_tokens),
                               modes=chosen, examples=examples, min_real=min_real, victim=victim, out=out)
        with open_store(db) as store:
            result = run_describe(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


@app.command()
def generate(
    backend: str = typer.Option(..., "--backend", help="openai:<image model> (dall-e-3, gpt-image-1, ...) or diffusers:<hub id or local folder>."),
    per_mode: int = typer.Option(10, "--per-mode", min=1, help="Images per mode."),
    mode: Optional[List[str]] = ModesOpt,
    prompt_model: Optional[str] = typer.Option(None, "--prompt-model", help="LLM that rewrites descriptions into image prompts (needed by every backend but openai:dall-e-3)."),
    descriptions: Optional[Path] = typer.Option(None, "--descriptions", help="Folder of edited <mode>.txt (from `vhmine describe --out`) [default: the store's newest]."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where images go, as <sha256>.png [default: data/generated]."),
    size: str = typer.Option("1024x1024", "--size", help="Image size for openai backends."),
    device: Optional[str] = typer.Option(None, "--device", help="diffusers: cpu, cuda, ... [default: cuda when present]."),
    dtype: Optional[str] = typer.Option(None, "--dtype", help="diffusers: float32, float16, bfloat16 [default: float16 on cuda, else float32]."),
    steps: int = typer.Option(30, "--steps", min=1, help="diffusers: denoising steps."),
    guidance: float = typer.Option(7.5, "--guidance", help="diffusers: classifier-free guidance scale."),
    seed: int = typer.Option(0, "--seed", help="diffusers: image k of a mode uses seed SEED + k."),
    width: Optional[int] = typer.Option(None, "--width", min=8, help="diffusers: image width [default: the pipeline's]."),
    height: Optional[int] = typer.Option(None, "--height", min=8, help="diffusers: image height [default: the pipeline's]."),
    base_url: Optional[str] = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: Optional[float] = MaxCostOpt,
    prices: Optional[Path] = PricesOpt,
    cache: Optional[Path] = CacheOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Render images from each mode's description and queue them for curation (exit 3: partial)."""
    try:
        from .generate import GenerateOptions, generate as run_generate, parse_backend
        from .store import open_store

        if parse_backend(backend).needs_rewrite and not prompt_model:
            raise InputError(f"backend {backend} needs --prompt-model: an LLM that rewrites each description into "
                             "an image prompt (e.g. --prompt-model gpt-4o); only openai:dall-e-3 takes descriptions as they are")
        opts = GenerateOptions(
            backend=backend, per_mode=per_mode, modes=mode or None, descriptions=descriptions, out=out, size=size,
            device=device, dtype=dtype, steps=steps, guidance=guidance, seed=seed, width=width, height=height,
            llm=_llm_options(prompt_model or backend.partition(":")[2], base_url, concurrency, timeout, max_retries,
                             retry_wait, max_cost, prices, cache))
        with open_store(db) as store:
            result = run_generate(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


@app.command()
def manipulate(
    model: str = typer.Option(..., "--model", help="The victim MLLM, as the endpoint names it (e.g. gpt-4o)."),
    index: Optional[str] = typer.Option(None, "--index", help="Collection whose images are the scenes [default: VHMINE_INDEX, or the only one there is]."),
    indexes: Optional[Path] = IndexesOpt,
    strategy: Optional[List[str]] = typer.Option(None, "--strategy", help="abnormal, paired or removal (repeatable) [default: all three]."),
    per_strategy: int = typer.Option(10, "--per-strategy", min=1, help="Edited images per strategy."),
    prior: str = typer.Option("counts", "--prior", help="What picks the object: counts (co-occurrence over the annotations) or llm."),
    prior_model: Optional[str] = typer.Option(None, "--prior-model", help="Text-only model of --prior llm."),
    coco_annotations: Optional[Path] = typer.Option(None, "--coco-annotations", help="COCO instances JSON [default: the one the collection was embedded with]."),
    detector: Optional[str] = typer.Option(None, "--detector", help="Owl-ViT / OWLv2 hub id or local folder, for scenes without annotations."),
    vocabulary: Optional[str] = typer.Option(None, "--vocabulary", help="Comma-separated object names for --detector [default: the COCO categories]."),
    inpaint: Optional[str] = typer.Option(None, "--inpaint", help="diffusers:<hub id or local folder> (an inpainting pipeline) or openai:<model> (an image edit); needed by removal."),
    judge: Optional[str] = typer.Option(None, "--judge", help="Model that judges answers against the edit's truth [default: the yes/no rule]."),
    rule: str = typer.Option("vhtest", "--rule", help="Yes/no rule: vhtest, firstword, pope, strict."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where edited images, masks and the report go [default: data/manipulated]."),
    device: Optional[str] = typer.Option(None, "--device", help="Detector and inpainting: cpu, cuda ... [default: cuda when present]."),
    steps: int = typer.Option(30, "--steps", min=1, help="Inpainting denoising steps."),
    seed: int = typer.Option(0, "--seed", help="Scene order and inpainting seed."),
    base_url: Optional[str] = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: Optional[float] = MaxCostOpt,
    prices: Optional[Path] = PricesOpt,
    cache: Optional[Path] = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Edit scenes against the language prior (AutoHallusion), queue them, report ASR / MASR / CASR (exit 3: partial)."""
    try:
        from .manipulate import ManipulateOptions, manipulate as run_manipulate
        from .store import open_store

        opts = ManipulateOptions(
            llm=_llm_options(model, base_url, concurrency, timeout, max_retries, retry_wait, max_cost, prices, cache,
                             max_tokens),
            index=index, indexes=indexes, coco_annotations=coco_annotations, detector=detector,
            vocabulary=tuple(v.strip() for v in (vocabulary or "").split(",") if v.strip()), prior=prior,
            prior_model=prior_model, strategies=tuple(strategy or ("abnormal", "paired", "removal")),
            per_strategy=per_strategy, inpaint=inpaint, judge=judge, rule=rule, out=out, device=device, steps=steps,
            seed=seed)
        with open_store(db) as store:
            result = run_manipulate(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


@app.command()
def blind(
    model: str = typer.Option(..., "--model", help="The text-only model that answers without the image (e.g. gpt-4o-mini)."),
    judge: Optional[str] = typer.Option(None, "--judge", help="Model that judges open-ended answers [default: match, a reference answer appears in the answer, as eval scores]."),
    rule: str = typer.Option("vhtest", "--rule", help="Yes/no rule for YNQ answers: vhtest, firstword, pope, strict."),
    mode: Optional[List[str]] = ModesOpt,
    kind: Optional[List[str]] = typer.Option(None, "--kind", help="Only OEQ or YNQ instances (repeatable; any case) [default: both]."),
    base_url: Optional[str] = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: Optional[float] = MaxCostOpt,
    prices: Optional[Path] = PricesOpt,
    cache: Optional[Path] = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Ask a text-only model every ready question without its image; flag those it gets right on every image (exit 3: partial)."""
    try:
        from .blind import BlindOptions, blind as run_blind
        from .probe import check_kinds
        from .store import open_store

        opts = BlindOptions(llm=_llm_options(model, base_url, concurrency, timeout, max_retries, retry_wait, max_cost,
                                             prices, cache, max_tokens),
                            judge=judge, rule=rule, modes=mode or None, kinds=check_kinds(kind or ["OEQ", "YNQ"]))
        with open_store(db) as store:
            result = run_blind(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


@app.command()
def draft(
    model: Optional[str] = typer.Option(None, "--model", help="The vision model that drafts each pair task (e.g. gpt-4o)."),
    stats: bool = typer.Option(False, "--stats", help="Print what verifying drafts saves (time per verified item against per item written from scratch, accept / edit rates per mode) and ask no model."),
    mode: Optional[List[str]] = ModesOpt,
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Draft at most this many pair tasks."),
    base_url: Optional[str] = BaseUrlOpt,
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: Optional[float] = MaxCostOpt,
    prices: Optional[Path] = PricesOpt,
    cache: Optional[Path] = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Draft each open pair task's question and per-image answers with a vision model, for workers to verify (exit 3: partial)."""
    try:
        from .store import open_store

        if stats:
            from .curate import draft_savings, savings_table

            with open_store(db) as store:
                typer.echo(savings_table(draft_savings(store)))
            return
        if not model:
            raise InputError("give --model M (the vision model that drafts), or --stats to see what verifying saves")
        from .draft import DraftOptions, draft as run_draft

        opts = DraftOptions(llm=_llm_options(model, base_url, concurrency, timeout, max_retries, retry_wait, max_cost,
                                             prices, cache, max_tokens), modes=mode or None, limit=limit)
        with open_store(db) as store:
            result = run_draft(store, opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)


# --- export and eval (vhmine.export, vhmine.eval) ----------------------------------------------------

@app.command()
def export(
    out: Path = typer.Option(..., "--out", help="The benchmark folder to write (must not exist unless --replace)."),
    fmt: str = typer.Option("vhtest", "--format", help="vhtest, vlmevalkit, lmms-eval, hf, pope, llava or hallusionbench."),
    kind: str = typer.Option("both", "--kind", help="oeq, ynq or both."),
    per_mode: Optional[int] = typer.Option(None, "--per-mode", min=1, help="Instances per mode and kind (YNQ: half yes, half no) [default: all]."),
    mode: Optional[List[str]] = typer.Option(None, "--mode", help="Export only this mode (repeatable) [default: all 8]."),
    allow_unbalanced: bool = typer.Option(False, "--allow-unbalanced", help="Go on when yes/no questions are not 50/50 within a mode."),
    seed_: int = typer.Option(0, "--seed", help="Seed of --per-mode sampling and of the llava 80/20 split."),
    replace: bool = typer.Option(False, "--replace", help="Replace an existing --out folder."),
    name: Optional[str] = typer.Option(None, "--name", help="Benchmark name [default: the folder's name]."),
    with_provenance: bool = typer.Option(False, "--with-provenance", help="Keep worker names and this machine's paths (internal use) [default: pseudonyms, relative paths]."),
    drop_blind: bool = typer.Option(False, "--drop-blind", help="Leave out questions a blind solver answered right without the image (`vhmine blind`), unless a worker overruled the flag."),
    near_dups: bool = typer.Option(False, "--near-dups", help="Check the exported images for near duplicates of each other (and generated ones against their source collection), with the encoders of the index they were mined from."),
    against: Optional[str] = typer.Option(None, "--against", help="Also check them against this reference index from `vhmine embed` (name or folder; e.g. COCO train2017), with its encoders; implies --near-dups."),
    dup_clip: float = typer.Option(0.95, "--dup-clip", help="Near duplicate: CLIP cosine >= this (and DINOv2 >= --dup-dino)."),
    dup_dino: float = typer.Option(0.9, "--dup-dino", help="Near duplicate: DINOv2 cosine >= this (and CLIP >= --dup-clip)."),
    indexes: Optional[Path] = IndexesOpt,
    device: Optional[str] = typer.Option(None, "--device", help="Encoders' device for the near-duplicate check: cpu, cuda ... [default: cuda when present]."),
    version: Optional[str] = typer.Option(None, "--version", help="This export's version, an integer or semver (1.2.0), later than --since's [default: --since's counted up, else 1]."),
    since: Optional[Path] = typer.Option(None, "--since", help="An earlier export: write CHANGELOG.md and changelog.json (items added, removed, changed, with who and why from the store's action log)."),
    db: Optional[str] = DbOpt,
) -> None:
    """Write the store's ready instances as a benchmark folder (with a manifest, a version and pair groups)."""
    try:
        from .export import ExportOptions, export_benchmark
        from .store import open_store

        dups = None
        if near_dups or against:
            from .neardup import DupOptions

            dups = DupOptions(against=against, indexes=indexes, clip_min=dup_clip, dino_min=dup_dino, device=device)
        opts = ExportOptions(out=out, format=fmt, kind=kind.lower(), per_mode=per_mode, allow_unbalanced=allow_unbalanced,
                             seed=seed_, replace=replace, name=name, modes=mode or None, with_provenance=with_provenance,
                             drop_blind=drop_blind, near_dups=dups, version=version, since=since)
        with open_store(db) as store:
            result = export_benchmark(store, opts)
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())


@app.command("eval")
def eval_(
    bench: Path = typer.Option(..., "--bench", help="A benchmark folder from `vhmine export`, or HallusionBench's JSON, or POPE's JSON lines."),
    model: Optional[List[str]] = typer.Option(None, "--model", help="Ask this model (repeatable; OpenAI-compatible endpoint)."),
    predictions: Optional[List[str]] = typer.Option(None, "--predictions", help="NAME=FILE: score answers already made: vhmine's own (id and answer per item), VLMEvalKit's <model>_<dataset>.xlsx or lmms-eval's --log_samples JSONL (repeatable; one NAME over several files merges them)."),
    out: Path = typer.Option(Path("eval"), "--out", help="Folder for report.md, report.json, answers and the chart."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint [env OPENAI_BASE_URL]."),
    judge: Optional[str] = typer.Option(None, "--judge", help="Judge model for open-ended answers (implies --oeq judge)."),
    oeq: Optional[str] = typer.Option(None, "--oeq", help="Open-ended scoring: match (reference appears in the answer), judge, or labels (the store's verdicts on this model's responses: workers' majority, else probe's rule or judge) [default: judge with --judge, else match]."),
    rule: str = typer.Option("vhtest", "--rule", help="Yes/no rule: vhtest (VHTest's classify_response), firstword, pope or strict."),
    fmt: Optional[str] = typer.Option(None, "--format", help="The benchmark's format [default: detected]."),
    images: Optional[Path] = typer.Option(None, "--images", help="Folder of a foreign benchmark's images (POPE, HallusionBench, LLaVA); image paths must stay inside it."),
    partial: bool = typer.Option(False, "--partial", help="Score only the items that have an answer."),
    judge_agreement: bool = typer.Option(False, "--judge-agreement", help="With --judge: Cohen's kappa between the judge's verdicts and workers' labels in the store (--db), where both exist."),
    concurrency: int = ConcurrencyOpt,
    timeout: float = TimeoutOpt,
    max_retries: int = RetriesOpt,
    retry_wait: float = RetryWaitOpt,
    max_cost: Optional[float] = MaxCostOpt,
    prices: Optional[Path] = PricesOpt,
    cache: Optional[Path] = CacheOpt,
    max_tokens: int = MaxTokensOpt,
    db: Optional[str] = DbOpt,
) -> None:
    """Score models on a benchmark: accuracy per mode, pair and image accuracy, yes/no bias (exit 3: partial)."""
    try:
        from .eval import EvalOptions, evaluate

        preds = []
        for p in predictions or []:
            if "=" not in p:
                raise InputError(f"--predictions {p!r} is not NAME=FILE")
            n, f = p.split("=", 1)
            preds.append((n, Path(f)))
        # the same model-access settings as probe / describe / generate (vhmine.llm.LLMOptions fields)
        llm = {"concurrency": concurrency, "timeout_s": timeout, "max_retries": max_retries, "retry_wait_s": retry_wait,
               "max_cost": max_cost, "prices": prices, "cache": cache, "max_tokens": max_tokens}
        opts = EvalOptions(bench=bench, out=out, models=model or [], predictions=preds, fmt=fmt, images=images, rule=rule,
                           oeq=oeq, judge=judge, base_url=base_url, db=db, partial=partial,
                           judge_agreement=judge_agreement, llm=llm)
        result = evaluate(opts)
    except VhmineError as err:
        _fail(err)
    _finish(result)  # items whose request failed are not scored: exit 3, as probe


def main(argv: Optional[List[str]] = None) -> None:
    app(args=argv, prog_name="vhmine")


if __name__ == "__main__":
    main()
