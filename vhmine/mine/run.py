"""Stage 2, mine: one run, its steps each a call into its own module, control passing down once:

    plan.context   the options checked into the run's context (RunContext: run folder, default folder,
                   warnings, start time, options)
    runlock        one mine a run folder at a time (runs/.<run>.lock), and only over an earlier run
    plan.plan_run  the shape (triangle, band of a grown index, --against rectangle) and its indexes opened
    engine         LocalEngine (mine.local_run) or RayEngine (mine.ray_run): the pairs found, ranked and
                   capped, with the growth state to keep (mine.engine.Mined); neither knows the run folder
    publish        the run folder written into a temporary folder and swapped in whole (MineResult)

Reads `indexes/<name>/` (vhmine.index); writes `runs/<run>/` (see vhmine.mine). `--plan` (Ray) sizes the job
instead (mine.sizing) and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vhmine.config import DEFAULT_CLIP_MIN, DEFAULT_DINO_MAX


@dataclass
class MineOptions:
    index: str | None = None
    clip: float = DEFAULT_CLIP_MIN
    dino: float = DEFAULT_DINO_MAX
    max_pairs: int | None = None
    max_per_image: int | None = None
    out: Path | None = None
    indexes: Path | None = None
    device: str | None = None
    engine: str = "local"  # "local": mine.local_run (mine.join here); "ray": mine.ray_run (mine.ray on a cluster)
    ray_address: str | None = None
    tile_memory: int | None = None  # bytes per Ray tile [default: mine.ray.DEFAULT_TILE_MEMORY]
    index_url: str | None = None  # where Ray workers read the index (fsspec URL or shared path) [default: its folder]
    plan: bool = False  # Ray: size the job (tiles, memory, a measured rate, estimated time) instead of mining
    tiles: list[int] | None = None  # Ray: mine only these tile numbers (sizing runs and benchmarks)
    gallery_size: int = 100
    progress: bool = True
    kernel: str | None = None  # the products kernel (mine.join.kernels.KERNELS) [default: the fastest measured]
    full: bool = False  # mine every pair even when an earlier run of the same command could be reused (mine.grow)
    prune: bool | None = None  # skip products that provably hold no pair (mine.join.prune) [None: when it pays]
    against: str | None = None  # a second index (name under --indexes, or folder): pairs with one image from each


def mine_index(opts):
    """Mine the index into the run folder (a MineResult); with opts.plan (Ray only), size the job instead
    and return its MinePlan without mining. Ctrl-C becomes an Interrupted that says what was kept."""
    try:
        return _mine(opts)
    except KeyboardInterrupt:
        from vhmine.errors import Interrupted

        if opts.engine == "ray":  # finished tiles are files in the job folder: the same command resumes from them
            raise Interrupted(
                "interrupted: the tiles finished so far are kept in the run's job folder; run the same "
                "command to resume"
            ) from None
        # a run folder is published whole at the end: an interrupted one leaves nothing
        raise Interrupted(
            "interrupted: no run written (mine publishes its run folder whole, at the end; an earlier "
            "run there is as it was); run the same command to mine again"
        ) from None


def _mine(opts):
    from vhmine.mine.plan import context, plan_run

    ctx = context(opts)
    if opts.plan:  # Ray: size the job; nothing is written, so no lock
        from vhmine.mine.sizing import plan_ray

        return plan_ray(plan_run(ctx).a, opts)
    from vhmine.mine.runlock import run_lock

    if opts.engine == "ray":  # the engine --engine names (mine.engine.Engine)
        from vhmine.mine.ray_run import RayEngine as Engine
    else:
        from vhmine.mine.local_run import LocalEngine as Engine
    from vhmine.mine.publish import publish

    # one mine a run folder at a time, and only over an earlier run (each refusal one line)
    with run_lock(ctx.run_dir):
        plan = plan_run(ctx)
        return publish(plan, Engine().mine(plan))
