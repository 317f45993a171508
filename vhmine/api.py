"""The Python API: the calls a notebook user makes, with the CLI's names (`vhmine embed` is `api.embed`).

    from vhmine import api

    api.embed("photos/", name="photos")                     # indexes/photos/
    run = api.mine(index="photos", clip=0.9, dino=0.55)      # runs/photos-clip0.9-dino0.55/
    api.seed(run.run_dir / "pairs.parquet", per_mode=50)     # the curation store's queues
    api.export("benchmarks/vh", format="hf", per_mode=100)   # a benchmark folder
    report = api.evaluate("benchmarks/vh", predictions=[("my-model", "answers.jsonl")])
    bench = api.read_benchmark("benchmarks/vh")              # a vhmine.bench.Benchmark

Each function takes the command's options as keyword arguments (the fields of the stage's options
dataclass: EmbedOptions, MineOptions, ExportOptions, EvalOptions), runs the same library call as the
command, and returns the stage's result object (its `summary()` is what the command prints). A
VhmineError says what was wrong, as on the command line. Reads and writes what each stage does;
nothing heavy is imported until a function is called.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

PathLike = str | os.PathLike


def embed(images: PathLike, **options):
    """`vhmine embed IMAGES`: embed a folder, COCO or WebDataset tars into `indexes/<name>/` (an EmbedResult).

    Options are EmbedOptions' fields: name, coco_annotations, clip_model, dino_model, indexes, device,
    batch_size, workers, precision, backend, shard_size, max_pixels, engine, ray_address, ray_actors."""
    from vhmine.embed import EmbedOptions, embed_collection

    return embed_collection(EmbedOptions(images=str(images), **options))


def mine(index: str | None = None, **options):
    """`vhmine mine`: pairs CLIP calls alike and DINOv2 does not, into a run folder (a MineResult).

    Options are MineOptions' fields: clip, dino, max_pairs, max_per_image, out, indexes, device,
    gallery_size, engine, ray_address, tile_memory (bytes), index_url, plan (then a MinePlan comes back and
    nothing is mined), tiles, kernel (the products kernel, mine.join.kernels.KERNELS; None: measured), against (a second
    index: pairs with one image from each), full (mine every pair even when an earlier run could be reused), prune
    (skip the products that provably hold no pair, mine.join.prune: None when measured to pay, True, False)."""
    from vhmine.mine import MineOptions, mine_index

    return mine_index(MineOptions(index=index, **options))


def seed(pairs: PathLike, *, db: str | None = None, per_mode: int = 100, modes: Sequence[str] | None = None):
    """`vhmine seed --pairs PAIRS`: mined pairs into the store's per-mode queues (a SeedResult)."""
    from vhmine.seed import read_pairs, seed_pairs
    from vhmine.store import open_store

    table = read_pairs(pairs)  # a missing, unreadable or empty table makes no store
    with open_store(db, create=True) as store:  # seed may make the first store
        return seed_pairs(store, pairs, per_mode=per_mode, modes=modes, table=table)


def export(out: PathLike, format: str = "vhtest", *, db: str | None = None, **options):
    """`vhmine export --out OUT --format F`: the store's ready instances as a benchmark folder (an ExportResult).

    Options are ExportOptions' fields: kind, per_mode, allow_unbalanced, seed, replace, name, modes,
    with_provenance, drop_blind, near_dups (a vhmine.export.neardup.DupOptions, or None for off), version, since,
    license, description, citation (what croissant.json and the dataset card say; None: unspecified)."""
    from vhmine.export import ExportOptions, export_benchmark
    from vhmine.store import open_store

    opts = ExportOptions(out=Path(out), format=format, **options)
    with open_store(db, create=False) as store:  # a mistyped --db is named, never a new empty store
        return export_benchmark(store, opts)


def evaluate(bench: PathLike, out: PathLike = "eval", **options):
    """`vhmine eval --bench BENCH`: score models on a benchmark into `out` (an EvalResult).

    Options are EvalOptions' fields: models (names to ask), predictions ((name, file) pairs), fmt, images,
    rule, oeq, judge, base_url, db, partial, judge_agreement, llm (further LLMOptions fields)."""
    from vhmine.eval import EvalOptions
    from vhmine.eval import evaluate as run

    if "predictions" in options:
        options["predictions"] = [(name, Path(path)) for name, path in options["predictions"]]
    return run(EvalOptions(bench=Path(bench), out=Path(out), **options))


def read_benchmark(path: PathLike, format: str | None = None, **options):
    """A benchmark folder or file (ours or a foreign one: HallusionBench, POPE, ...) as a vhmine.bench.Benchmark."""
    from vhmine import formats

    return formats.load(Path(path), format, **options)
