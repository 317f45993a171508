"""Stage 2, mine: an index -> `runs/<run>/` with the pairs that CLIP calls alike and DINOv2 does not.

Reads `indexes/<name>/`; writes `pairs.parquet`, `pairs.csv`, `run.json`, `scatter.png`, `gallery.html`.
Entry: `mine_index(MineOptions(...))` in vhmine.mine.job (the Python API's `vhmine.api.mine`). simsearch is
the exact thresholded join, ray_engine runs its tiles on a Ray cluster, gallery draws the run.
"""
