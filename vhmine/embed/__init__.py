"""Stage 1, embed: an image collection (a folder, COCO, WebDataset tars) -> `indexes/<name>/`.

Reads images; writes the index (`manifest.json`, `images.parquet`, `clip.faiss`, `dino.faiss`,
`skipped.csv`) through vhmine.index, which owns its files, and its own work folder `indexes/<name>/work/`.
Entry: `embed_collection(EmbedOptions(...))` in vhmine.embed.job (the Python API's `vhmine.api.embed`).
Roles, one module each: read (sources of image records and the decoding dataset), encoders (CLIP and
DINOv2 loading and encoding), tiny (random-weight encoders in the real formats), work (the work folder:
plan, shards), run (shards through reader, encoders, writer), ray_engine (the Ray distributor), search
(nearest-neighbour search over vectors, on GPUs where faiss has them).
"""
