"""The Ray engine of `vhmine mine --engine ray`: the exact join's blocks (mine.join) as Ray tasks over tiles,
so an index of any size is mined with memory per tile, never per index. Knows nothing of run folders: the
run (mine.ray_run) gives it an index's rows (vhmine.index.IndexRows) and a job folder and takes back the
tiles' ranked pairs.

Reads the index by row range (positioned reads on a shared filesystem or byte ranges of an fsspec URL);
writes the job folder `runs/.<run>.job/` (tilejob: every finished tile as a file, so a stopped job
resumes). Modules: engine (the driver: tile size from a memory bound, scheduling, retries), arrays
(`find_pairs_ray` over arrays for tests and benchmarks), scan (the probe of every node, the streaming scan
that fixes the quantiser and records row digests, read from the index's kept ones where they still check, and
the pruning's choice on a sample), tileshapes (the
tiles of a triangle, of the band of pairs touching new rows, of a rectangle across two indexes), tiletask
(what one task does), tilejob (the job folder) and merge (the tiles' sorted lists merged in rank order,
capped).
"""

from __future__ import annotations

from vhmine.mine.ray.arrays import find_pairs_across_ray, find_pairs_ray
from vhmine.mine.ray.engine import (
    DEFAULT_TILE_MEMORY,
    SCATTER_POINTS,
    connect,
    import_ray,
    probe_nodes,
    run_job,
    slots,
    tile_bytes,
    tile_rows,
)
from vhmine.mine.ray.merge import capped, ranked, scatter_points, shared_drops, without
from vhmine.mine.ray.tilejob import TileJob, box_first, orient_by_id, ranked_dtype
from vhmine.mine.ray.tileshapes import Band, Rectangle, Triangle
from vhmine.mine.ray.tiletask import sample_tile

__all__ = [
    "DEFAULT_TILE_MEMORY",
    "SCATTER_POINTS",
    "Band",
    "Rectangle",
    "TileJob",
    "Triangle",
    "box_first",
    "capped",
    "connect",
    "find_pairs_across_ray",
    "find_pairs_ray",
    "import_ray",
    "orient_by_id",
    "probe_nodes",
    "ranked",
    "ranked_dtype",
    "run_job",
    "sample_tile",
    "scatter_points",
    "shared_drops",
    "slots",
    "tile_bytes",
    "tile_rows",
    "without",
]
