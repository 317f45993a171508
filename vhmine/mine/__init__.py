"""Stage 2, mine: an index -> `runs/<run>/` with the pairs that CLIP calls alike and DINOv2 does not.

Reads `indexes/<name>/` (vhmine.index); writes `pairs.parquet`, `pairs.csv`, `run.json`, `rows.parquet`,
`alike.parquet`, `scatter.png`, `gallery.html`. Entry: `mine_index(MineOptions(...))` in vhmine.mine.job (the
Python API's `vhmine.api.mine`). Three rooms:

- `mine/join/`: the exact thresholded join, a library that knows nothing of runs, folders or Ray, one entry
  per shape (the triangle, the band of a grown index's new rows, the rectangle across two indexes);
- `mine/ray/`: the Ray engine (tiles of those shapes as Ray tasks, the job folder, the merge);
- the run itself, here: job (the options; it chooses the engine), local_run and ray_run (the run on each
  engine: siblings, neither imports the other), across (`--against`: the two indexes opened and checked),
  runfolder (the run folder, published whole), grow and state (reusing an earlier run of a grown index),
  write (the pairs table, sharded when large), gallery (scatter and gallery), relax (what to relax when a
  run finds nothing).
"""
