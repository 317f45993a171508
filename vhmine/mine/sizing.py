"""`vhmine mine --engine ray --plan`: the Ray job sized before it runs (MinePlan): tiles, memory per task, the
cluster's nodes and slots, and an estimate from one tile mined and timed on the cluster. Reads the index's
headers (vhmine.index rows); writes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from vhmine.errors import InputError


@dataclass
class MinePlan:
    index: str
    images: int
    dims: tuple[int, int]
    tile: int
    tiles: int
    blocks: int
    pairs: int
    task_bytes: int
    nodes: list[str] = field(default_factory=list)
    slots: int = 1
    device: str = "cpu"
    sample: dict = field(default_factory=dict)

    @property
    def rate(self) -> float:
        """Pairs per second per worker, measured on one tile of the cluster."""
        return self.sample["examined"] / max(self.sample["seconds"], 1e-9)

    @property
    def seconds(self) -> float:
        scan = self.images / (self.sample["scan_rows"] / max(self.sample["scan_seconds"], 1e-9)) / self.slots
        return scan + self.pairs / self.rate / min(self.slots, self.tiles)

    def summary(self) -> str:
        s = self.sample
        return "\n".join(
            [
                (
                    f"plan for index {self.index!r}: {self.images:,} images, CLIP {self.dims[0]}-d + DINOv2"
                    f" {self.dims[1]}-d"
                ),
                (
                    f"tiles: {self.tiles:,} ({self.blocks:,} row blocks of {self.tile:,} rows, upper triangle), "
                    f"{self.pairs:,} pairs to look at"
                ),
                (
                    f"memory per tile task: {self.task_bytes / 2**20:,.0f} MiB (+ 24 bytes per candidate); the driver "
                    "holds bookkeeping per tile, never the vectors"
                ),
                f"cluster: {len(self.nodes)} node(s) read the index; {self.slots} tile(s) at once on {self.device}",
                (
                    f"measured: a {s['rows_a']:,} x {s['rows_b']:,} tile in {s['seconds']:.2f} s on one worker: "
                    f"{self.rate:,.3g} pairs/s per worker"
                ),
                *([f"that worker's {s['kernel_line']}"] if s.get("kernel_line") else []),
                (
                    f"estimated: {_duration(self.seconds)} for the scan and all tiles at {self.slots} worker(s) "
                    f"({_duration(self.pairs / self.rate)} of one worker's time)"
                ),
            ]
        )


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.1f} s"


def plan_ray(idx, opts) -> MinePlan:
    """Size the job: tiles, memory per task, and an estimate from one tile mined and timed on the cluster."""
    from vhmine.mine.ray import Triangle, connect, import_ray, probe_nodes, sample_tile, slots, tile_bytes
    from vhmine.mine.ray_run import device_of, rows_of, tile_side

    ray = import_ray()
    device = device_of(opts)
    rows, _ = rows_of(idx, opts, ids=False)
    side = tile_side(opts, rows)
    tri = Triangle(rows.n, side)
    plan = MinePlan(
        idx.name,
        rows.n,
        (rows.clip.dim, rows.dino.dim),
        side,
        len(tri),
        tri.blocks,
        rows.n * (rows.n - 1) // 2,
        tile_bytes(side, rows.clip.dim, rows.dino.dim),
        device=device,
    )
    started = connect(ray, opts.ray_address)
    try:
        plan.nodes = probe_nodes(ray, rows)
        plan.slots = slots(ray, device)
        r, c = tri.tile_at(1 if len(tri) > 1 else 0)  # an off-diagonal tile where there is one: a full one
        task = ray.remote(sample_tile).options(
            num_cpus=1, num_gpus=1 if device == "cuda" else 0, memory=plan.task_bytes
        )
        plan.sample = ray.get(task.remote(rows, r, c, side, opts.clip, device, opts.kernel))
        plan.sample.update(rows_a=min(side, rows.n - r), rows_b=min(side, rows.n - c))
    finally:
        if started:
            ray.shutdown()
    if not math.isfinite(plan.rate) or plan.rate <= 0:
        raise InputError("the sample tile took no measurable time; the index is too small to plan a job for")
    return plan
