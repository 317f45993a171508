"""`vhmine embed`, `mine`, `demo` and `data coco`: the commands of the first stages (registered on
vhmine.cli.options.app).

Thin wiring over vhmine.api (embed, mine) and vhmine.demo, vhmine.data.coco; reads and writes what those do.
"""

from __future__ import annotations

from pathlib import Path

import typer

from vhmine.cli.options import IndexesOpt, PlainUsage, _fail, app, data_app, interruptible
from vhmine.config import DEFAULT_CLIP_MIN, DEFAULT_CLIP_MODEL, DEFAULT_DINO_MAX, DEFAULT_DINO_MODEL
from vhmine.errors import InputError, VhmineError


def _auto_on_off(flag: str, value: str) -> bool | None:
    """auto -> None (measured), on -> True, off -> False; InputError for anything else."""
    try:
        return {"auto": None, "on": True, "off": False}[value]
    except KeyError:
        raise InputError(f"{flag} {value}: use auto, on or off") from None


@app.command(cls=PlainUsage)
@interruptible("interrupted before any shard was written; run the same command to start again")
def embed(
    images: str = typer.Argument(
        ...,
        metavar="IMAGES",
        help=(
            "Folder of images (searched recursively: jpg, jpeg, png, webp), or WebDataset .tar shards: a .tar, a folder"
            " of them, or an fsspec URL."
        ),
    ),
    name: str | None = typer.Option(None, "--name", help="Collection name [default: the folder's name]."),
    coco_annotations: Path | None = typer.Option(
        None, "--coco-annotations", help="COCO instances JSON: keep COCO ids and object categories."
    ),
    clip_model: str = typer.Option(
        DEFAULT_CLIP_MODEL,
        "--clip-model",
        help="open_clip NAME:PRETRAINED, NAME:/path/to/checkpoint, or local-dir:/folder.",
    ),
    dino_model: str = typer.Option(
        DEFAULT_DINO_MODEL, "--dino-model", help="DINOv2 hub id or local folder (transformers format)."
    ),
    indexes: Path | None = IndexesOpt,
    device: str | None = typer.Option(None, "--device", help="cpu, cuda, cuda:1 ... [default: cuda when present]."),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Images per encoder forward pass."),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=0,
        help="Image-decoding worker processes [default: 0 on a small CPU machine, up to 16 with a GPU].",
    ),
    precision: str | None = typer.Option(
        None,
        "--precision",
        help=(
            "The encoders' precision: fp32, bf16, fp16, or auto (the fastest measured on this machine, a lower"
            " precision only where it is 1.25x fp32's rate) [env VHMINE_PRECISION; default auto]. A grown index"
            " keeps its own; naming another is refused."
        ),
    ),
    backend: str | None = typer.Option(
        None,
        "--backend",
        help=(
            "The encoders' runtime on a CPU: torch, openvino (pip install 'vhmine[cpu]'), or auto (the faster"
            " measured on this machine, cached; torch where openvino is not installed) [env VHMINE_EMBED_BACKEND;"
            " default auto]. Recorded in the index manifest's `backend`."
        ),
    ),
    shard_size: int = typer.Option(1024, "--shard-size", min=1, help="Images per resumable shard."),
    max_pixels: int = typer.Option(
        89_478_485, "--max-pixels", min=1, help="Skip images larger than this (decompression-bomb guard)."
    ),
    engine: str = typer.Option(
        "local", "--engine", help="local (this process) or ray (a Ray cluster: pip install 'vhmine[ray]')."
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="Ray cluster address [default: RAY_ADDRESS, a running local cluster, else a new local one].",
    ),
    ray_actors: int | None = typer.Option(
        None,
        "--ray-actors",
        min=1,
        help="Ray actors [default: one per GPU of the cluster; one per CPU where it has none].",
    ),
) -> None:
    """Embed an image collection with CLIP and DINOv2 into FAISS indexes (resumable)."""
    from vhmine import api

    try:
        result = api.embed(
            images,
            name=name,
            coco_annotations=coco_annotations,
            clip_model=clip_model,
            dino_model=dino_model,
            indexes=indexes,
            device=device,
            batch_size=batch_size,
            workers=workers,
            precision=precision,
            backend=backend,
            shard_size=shard_size,
            max_pixels=max_pixels,
            engine=engine,
            ray_address=ray_address,
            ray_actors=ray_actors,
        )
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())


@app.command()
@interruptible("interrupted: no run written; run the same command to mine again")
def mine(
    index: str | None = typer.Option(
        None, "--index", help="Index name [default: VHMINE_INDEX, or the only one there is]."
    ),
    clip: float = typer.Option(DEFAULT_CLIP_MIN, "--clip", help="Keep pairs with CLIP cosine >= this."),
    dino: float = typer.Option(DEFAULT_DINO_MAX, "--dino", help="Keep pairs with DINOv2 cosine <= this."),
    max_pairs: int | None = typer.Option(None, "--max-pairs", min=1, help="Keep only the top pairs by gap."),
    max_per_image: int | None = typer.Option(None, "--max-per-image", min=1, help="At most this many pairs per image."),
    out: Path | None = typer.Option(None, "--out", help="Run folder [default: runs/<index>-clip<C>-dino<D>]."),
    indexes: Path | None = IndexesOpt,
    device: str | None = typer.Option(
        None, "--device", help="cpu, cuda ... [default: cuda when present; cpu per Ray tile]."
    ),
    gallery_size: int = typer.Option(100, "--gallery-size", min=0, help="Pairs shown in gallery.html."),
    engine: str = typer.Option(
        "local",
        "--engine",
        help="local: this machine; ray: one Ray task per tile of the upper triangle (pip install 'vhmine[ray]').",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="Ray cluster to join, e.g. HEAD:6379 [default: RAY_ADDRESS, or a new local cluster].",
    ),
    tile_memory: float = typer.Option(
        1024,
        "--tile-memory",
        min=0.01,
        help="MiB of working memory per Ray tile task; sets the tile size (1024 MiB: 13,248 rows at 768 + 1024 dims).",
    ),
    index_url: str | None = typer.Option(
        None,
        "--index-url",
        help=(
            "Where Ray workers read the index folder: an fsspec URL (s3://..., gs://..., file:///shared/...) holding"
            " the same files [default: the index folder's own path, on a filesystem every node shares]."
        ),
    ),
    plan: bool = typer.Option(
        False,
        "--plan",
        help=(
            "With --engine ray: size the job (tiles, memory per task, a rate measured on one tile, estimated time) and"
            " mine nothing."
        ),
    ),
    kernel: str = typer.Option(
        "auto",
        "--kernel",
        help=(
            "Products kernel: auto (the fastest exact one, measured on the machine that runs the blocks: each Ray node"
            " its own), int-mm, fbgemm, blas-f32, torch-f32 or bf16."
        ),
    ),
    prune: str = typer.Option(
        "auto",
        "--prune",
        help=(
            "Skip products that provably hold no pair at --clip (rows ordered by similarity, bounds per group of rows):"
            " auto (when a sample of the rows says it pays), on, off."
        ),
    ),
    against: str | None = typer.Option(
        None,
        "--against",
        help=(
            "A second index (name under --indexes, or its folder) with the same encoders: mine only pairs with one"
            " image from each (side a from --index, side b from this)."
        ),
    ),
    full: bool = typer.Option(
        False,
        "--full",
        help=(
            "Mine every pair again, even when the finished run of this command (in --out, or its default folder) could"
            " be reused: by default a grown index mines only the pairs of its new rows."
        ),
    ),
) -> None:
    """Find image pairs that CLIP calls alike and DINOv2 calls different."""
    from vhmine import api

    try:
        result = api.mine(
            index,
            clip=clip,
            dino=dino,
            max_pairs=max_pairs,
            max_per_image=max_per_image,
            out=out,
            indexes=indexes,
            device=device,
            gallery_size=gallery_size,
            engine=engine,
            ray_address=ray_address,
            tile_memory=int(tile_memory * 2**20),
            index_url=index_url,
            plan=plan,
            kernel=None if kernel == "auto" else kernel,
            prune=_auto_on_off("--prune", prune),
            against=against,
            full=full,
        )
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())


@app.command()
def demo(
    limit: int = typer.Option(500, "--limit", min=2, help="Images to embed when COCO can be downloaded."),
    offline: bool = typer.Option(
        False, "--offline", help="Skip the download attempt: shipped photos and tiny local encoders."
    ),
    workdir: Path = typer.Option(Path("."), "--workdir", help="Where data/, indexes/ and runs/ go."),
) -> None:
    """Embed and mine a small collection end to end, then write the pairs and the gallery."""
    from vhmine.demo import run_demo

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
    base_url: str | None = typer.Option(None, "--base-url", help="Mirror to download from [env VHMINE_COCO_URL]."),
) -> None:
    """Download COCO images (and annotations), verify checksums, unpack."""
    from vhmine.data import download_coco

    try:
        result = download_coco(split, dest, annotations=annotations, base_url=base_url)
    except VhmineError as err:
        _fail(err)
    typer.echo(result.summary())
