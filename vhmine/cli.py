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
from .errors import VhmineError

app = typer.Typer(
    name="vhmine",
    help="Mine visual-hallucination test cases for multi-modal LLMs and turn them into benchmarks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
data_app = typer.Typer(help="Download and verify public image collections.", no_args_is_help=True)
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
    images: Path = typer.Argument(..., help="Folder of images (searched recursively: jpg, jpeg, png, webp)."),
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
) -> None:
    """Embed an image collection with CLIP and DINOv2 into FAISS indexes (resumable)."""
    from .embed import EmbedOptions, embed_collection

    opts = EmbedOptions(
        images=images, name=name, coco_annotations=coco_annotations, clip_model=clip_model,
        dino_model=dino_model, indexes=indexes, device=device, batch_size=batch_size,
        workers=workers, shard_size=shard_size, max_pixels=max_pixels,
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
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda ... [default: cuda when present]."),
    gallery_size: int = typer.Option(100, "--gallery-size", min=0, help="Pairs shown in gallery.html."),
) -> None:
    """Find image pairs that CLIP calls alike and DINOv2 calls different."""
    from .mine import MineOptions, mine_index

    opts = MineOptions(
        index=index, clip=clip, dino=dino, max_pairs=max_pairs, max_per_image=max_per_image,
        out=out, indexes=indexes, device=device, gallery_size=gallery_size,
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


# --- curation store: seed, workers, curate (vhmine.seed, vhmine.curate, apps/curate.py) -------------

DbOpt = typer.Option(None, "--db", help="Store: SQLAlchemy URL or SQLite file [env VHMINE_DB; default data/vhmine.db].")
workers_app = typer.Typer(help="Workers who annotate in the curation app.", no_args_is_help=True)
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


@app.command()
def curate(
    db: Optional[str] = DbOpt,
    host: str = typer.Option("127.0.0.1", "--host", help="Address to serve on (0.0.0.0 to let other machines in)."),
    port: int = typer.Option(8501, "--port", min=1, max=65535, help="Port to serve on."),
    app_path: Optional[Path] = typer.Option(None, "--app", help="The Streamlit script [default: apps/curate.py of this checkout]."),
) -> None:
    """Start the curation app (Streamlit) on the store."""
    try:
        from .curate import run_app

        rc = run_app(db=db, host=host, port=port, app_path=app_path)
    except VhmineError as err:
        _fail(err)
    raise typer.Exit(rc)


def main(argv: Optional[List[str]] = None) -> None:
    app(args=argv, prog_name="vhmine")


if __name__ == "__main__":
    main()
