"""Stage 2, mine: an index -> `runs/<run>/` with the pairs that CLIP calls alike and DINOv2 does not.

Reads `indexes/<name>/`; writes `pairs.parquet`, `pairs.csv`, `run.json`, `scatter.png`, `gallery.html`.
Entry: `mine_index(MineOptions(...))` in vhmine.mine.job (the Python API's `vhmine.api.mine`). simsearch is
the exact thresholded join, gallery draws the run, runfolder writes it, write builds the pairs table (sharded
when large). `--engine ray`: ray_run (the run and `--plan`) over ray_engine (the driver: tile scheduling),
ray_scan (its probe and streaming scan), tileshapes (the tiles of a triangle, a band of new rows, a rectangle
across two indexes), tiletask (what a task does), blocks (one tile from two quantised row blocks), tilejob (the
job folder that lets a stopped job resume) and merge (the tiles' pairs in rank order, capped).
"""
