"""Stage 1, embed: an image collection (a folder, COCO, WebDataset tars) -> `indexes/<name>/`.

Reads images; writes the index (`manifest.json`, `images.parquet`, `clip.faiss`, `dino.faiss`,
`skipped.csv`) through vhmine.index, which owns its files, and its own work folder `indexes/<name>/work/`.
Entry: `embed_collection(EmbedOptions(...))` in vhmine.embed.job (the Python API's `vhmine.api.embed`).
Roles, one module each: read (sources of image records and the decoding dataset), encoders (CLIP and
DINOv2 loading and encoding), tiny (random-weight encoders in the real formats), work (the work folder:
plan, shards), run (shards through reader, encoders, writer), ray_engine (the Ray distributor), search
(nearest-neighbour search over vectors, on GPUs where faiss has them).
"""

from vhmine.embed.encoders import HUB_HOST, host_reachable, load_clip, load_dino, resolve_device
from vhmine.embed.job import EmbedOptions, embed_collection
from vhmine.embed.precision import kept
from vhmine.embed.read import ShardReader, collate
from vhmine.embed.search import range_search
from vhmine.embed.tiny import build_clip, build_dino
from vhmine.embed.work import unfinished_job

__all__ = [
    # the stage
    "EmbedOptions",
    "embed_collection",
    "unfinished_job",
    # the encoders, for a later stage that embeds images as an index did (export's near duplicates)
    "load_clip",
    "load_dino",
    "resolve_device",
    "kept",
    "ShardReader",
    "collate",
    "range_search",
    # tiny random-weight encoders, and whether the model hub answers (the demo)
    "build_clip",
    "build_dino",
    "HUB_HOST",
    "host_reachable",
]
