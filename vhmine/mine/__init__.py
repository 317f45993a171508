"""Stage 2, mine: an index -> `runs/<run>/` with the pairs that CLIP calls alike and DINOv2 does not.

Reads `indexes/<name>/` (vhmine.index); writes `pairs.parquet`, `pairs.csv`, `run.json`, `rows.parquet`,
`alike.parquet`, `scatter.png`, `gallery.html`. Entry: `mine_index(MineOptions(...))` (the Python API's
`vhmine.api.mine`), which returns a MineResult (or, with --plan, the Ray job's MinePlan). Three rooms:

- `mine/join/`: the exact thresholded join, a library that knows nothing of runs, folders or Ray, one entry
  per shape (the triangle, the band of a grown index's new rows, the rectangle across two indexes);
- `mine/ray/`: the Ray engine (tiles of those shapes as Ray tasks, the job folder, the merge);
- the run itself, here, its steps in order (run: the orchestrator): plan (the options checked into one
  RunContext; the shape and its indexes: RunPlan), runlock (one mine a run folder at a time), an engine
  (engine: the interface; local_run's LocalEngine and ray_run's RayEngine, siblings that neither import
  each other nor know the run folder), rank (ranking and caps), background (the scatter's random pairs),
  relax (what to relax when a run finds nothing), grow and state (reusing an earlier run of a grown index),
  write (the pairs table, sharded when large), publish (the run folder, written and swapped in whole, with
  gallery's scatter and gallery); sizing (`--plan`: a Ray job sized before it runs).

Importing this package is light (no numpy, pandas or torch): the modules are loaded on first use.
"""

from __future__ import annotations

from vhmine.mine.gallery import PAGE_HEAD, thumbnail_data_url
from vhmine.mine.plan import RunContext, RunPlan, check_thresholds, default_run_name
from vhmine.mine.run import MineOptions, mine_index

__all__ = [
    "PAGE_HEAD",
    "MineOptions",
    "MinePlan",
    "MineResult",
    "RunContext",
    "RunPlan",
    "check_thresholds",
    "default_run_name",
    "mine_index",
    "thumbnail_data_url",
]


def __getattr__(name: str):
    # MineResult and MinePlan live with the step that makes them (publish, sizing): loaded when asked for
    if name == "MineResult":
        from vhmine.mine.publish import MineResult

        return MineResult
    if name == "MinePlan":
        from vhmine.mine.sizing import MinePlan

        return MinePlan
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
