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
  write (the pairs table, sharded when large; csvtext: pairs.csv's bytes, a column at a time), publish (the
  run folder, written and swapped in whole, with scatter's plot and gallery's page); sizing (`--plan`: a Ray job
  sized before it runs).

Importing this package is light (no numpy, pandas or torch): the modules are loaded on first use.
"""

from __future__ import annotations

# Each name is loaded from the step that makes it on first use (PEP 562), so importing the join or the Ray
# engine below (vhmine.mine.join, vhmine.mine.ray) runs none of the run's modules above them.
_WHERE = {
    "PAGE_HEAD": "gallery",
    "thumbnail_data_url": "gallery",
    "RunContext": "plan",
    "RunPlan": "plan",
    "check_thresholds": "plan",
    "default_run_name": "plan",
    "MineOptions": "run",
    "mine_index": "run",
    "MineResult": "publish",
    "MinePlan": "sizing",
    # the join's entries other stages use (the near-duplicate check, the demo): its own face, vhmine.mine.join
    "find_pairs": "join",
    "brute_force_pairs": "join",
    "pair_sims": "join",
}

__all__ = [
    "MineOptions",
    "MinePlan",
    "MineResult",
    "PAGE_HEAD",
    "RunContext",
    "RunPlan",
    "check_thresholds",
    "default_run_name",
    "mine_index",
    "thumbnail_data_url",
    "find_pairs",
    "brute_force_pairs",
    "pair_sims",
]  # the keys of _WHERE


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)


def __dir__() -> list[str]:
    return [*globals(), *__all__]
