"""A mining run's plan: the options (mine.run.MineOptions), checked into one typed run context (RunContext: the run
folder, the folder the same command without --out writes, the warnings, the start time, the options), and
the run's shape with the indexes it reads (RunPlan): the triangle of one index, the band of a grown index's
new rows (an earlier run of the same command reused: mine.grow), or the rectangle of `--against`.

Reads the indexes' manifests and image tables (vhmine.index: loaded whole for the local engine, headers only
for Ray) and, for a band, the earlier run's run.json and rows.parquet (mine.grow); writes nothing. The
engines (mine.local_run, mine.ray_run) take a RunPlan and never see the run folder; mine.run publishes it.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

from vhmine.config import indexes_root, runs_root
from vhmine.errors import InputError

log = logging.getLogger("vhmine.mine.job")  # (the logger's name predates this module: users filter on it)


@dataclass(frozen=True)
class RunContext:
    """What every step of one run shares, checked once (context): the options, the indexes' root and the index's
    name, the run folder, the folder the same command without --out writes (where a grown index's earlier run
    is looked for), the warnings (said once, kept in run.json) and the start time."""

    opts: object  # mine.run.MineOptions
    root: Path
    name: str
    run_dir: Path
    default_dir: Path
    warnings: tuple[str, ...]
    started: float


@dataclass(frozen=True)
class RunPlan:
    """The run's shape and what it reads: index `a` (and `b`, --against), the earlier run a band reuses
    (mine.grow.Earlier: its ids, digests and pairs; None: a full mine), where a Ray job keeps its tiles."""

    ctx: RunContext
    a: object  # vhmine.index.Index
    b: object | None = None
    earlier: object | None = None

    @property
    def shape(self) -> str:
        return "rectangle" if self.b is not None else "band" if self.earlier is not None else "triangle"

    @property
    def job_dir(self) -> Path:
        """Where a Ray job keeps its finished tiles until the run folder is written (mine.ray.TileJob)."""
        return job_folder(self.ctx.run_dir)

    def full(self) -> RunPlan:
        """The same run without the earlier run: every pair mined (the band's basis did not hold)."""
        return RunPlan(self.ctx, self.a, self.b, None)


def job_folder(run_dir: Path) -> Path:
    """Where a Ray run keeps its job (mine.ray.TileJob: the finished tiles) until its run folder is written."""
    return Path(run_dir).parent / f".{Path(run_dir).name}.job"


def check_thresholds(clip: float, dino: float) -> list[str]:
    """Raise on impossible thresholds; return warnings for suspicious ones."""
    for flag, v in (("--clip", clip), ("--dino", dino)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and -1.0 <= v <= 1.0):
            raise InputError(f"{flag} {v}: a cosine similarity threshold must lie in [-1, 1]")
    warnings = []
    if dino >= clip:
        warnings.append(
            f"--dino {dino} >= --clip {clip}: pairs are meant to be ones CLIP finds MORE alike than DINOv2 "
            "(e.g. --clip 0.9 --dino 0.55); many of these pairs will be plain near-duplicates"
        )
    return warnings


def default_run_name(index: str, clip: float, dino: float, against: str | None = None) -> str:
    return f"{index}{f'-x-{Path(against).name}' if against else ''}-clip{clip:g}-dino{dino:g}"


def context(opts) -> RunContext:
    """The options checked (each refusal one line, before anything is read) into the run's context."""
    from vhmine.index import default_index_name

    started = time.time()
    if opts.engine not in ("local", "ray"):
        raise InputError(f"--engine {opts.engine}: not an engine; use local or ray")
    if opts.plan and opts.engine != "ray":
        raise InputError("--plan sizes a Ray job: add --engine ray")
    if opts.index_url and opts.engine != "ray":
        raise InputError("--index-url tells Ray workers where the index is: add --engine ray")
    if opts.kernel not in (None, "auto"):
        from vhmine.mine.join import levels_of

        levels_of(opts.kernel, 8)  # a name that is no kernel is said before anything is read
    warnings = check_thresholds(opts.clip, opts.dino)  # kept in run.json
    for w in warnings:  # said once, before the search (not after it, in the summary)
        log.warning("%s", w)
    root, runs = indexes_root(opts.indexes), runs_root()
    name = default_index_name(root, opts.index)
    default_dir = runs / default_run_name(name, opts.clip, opts.dino, opts.against)
    run_dir = Path(opts.out) if opts.out else default_dir
    ctx = RunContext(opts, root, name, run_dir, default_dir, tuple(warnings), started)
    if opts.against and opts.plan:
        raise InputError("--plan sizes a triangle job; it does not size an --against one yet: leave out --plan")
    return ctx


def plan_run(ctx: RunContext) -> RunPlan:
    """The run's shape, its indexes opened (whole for the local engine: the driver of a Ray job never loads the
    vectors or the image table) and checked, and the earlier run a grown index's band reuses."""
    opts = ctx.opts
    load = opts.engine == "local"
    if opts.against:
        a, b = open_pair(ctx.root, ctx.name, opts, load=load)
        return RunPlan(ctx, a, b)
    from vhmine.index import open_index

    a = usable_index(open_index(ctx.root, ctx.name, load_vectors=load, load_images=load))
    plan = RunPlan(ctx, a)
    earlier = None if opts.plan else _earlier(ctx, a)
    return plan if earlier is None else dataclasses.replace(plan, earlier=earlier)


def _earlier(ctx: RunContext, idx):
    """The earlier run of this command that a grown index's band may reuse (mine.grow.reusable; why not is
    said in one line), or None: none there, --full, or one that cannot be reused."""
    from vhmine.mine.grow import earlier_run, reusable

    folder = None if ctx.opts.full else earlier_run(ctx.run_dir, ctx.default_dir)
    if folder is None:
        return None
    earlier, why = reusable(folder, idx, ctx.opts)
    if why:
        log.warning("%s", why)
    return earlier


def usable_index(idx, least: int = 2):
    """The index, unless it has fewer than `least` usable images (2 for a triangle; 1 for either side of an
    --against rectangle): then InputError, naming skipped.csv only when it lists images."""
    n = idx.manifest.get("counts", {}).get("images", 0) if idx.images is None else len(idx.images)
    if n < least:
        skipped = len(idx.manifest.get("skipped") or [])
        why = (
            f"see {idx.skipped_file} for the {skipped} image(s) that could not be read"
            if skipped
            else "embed a folder with more images into it, or mine it against another index with --against"
        )
        raise InputError(
            f"index {idx.name!r} has {n} usable image{'s' if n != 1 else ''}: mining needs at least {least} ({why})"
        )
    return idx


def open_pair(root: Path, name: str, opts, *, load: bool = True, least: int = 1):
    """`--against`: index A (a name under root) and index B (opts.against: a name under root, or a folder),
    refusing a pair whose vectors cannot be compared (other encoders, widths, precisions: vhmine.index's
    encoder_differences, which knows one encoder by two spellings of its path) in one line naming both and what
    differs. least: the fewest images either may have (one: a 1 x N rectangle has pairs). An image in both (the
    same image id) is never paired with itself, and a pair of two such images is written once
    (mine.join.keep_across)."""
    from vhmine.index import open_index, open_named_index

    a = usable_index(open_index(root, name, load_vectors=load, load_images=load), least)
    b = usable_index(open_named_index(opts.against, root, load=load), least)
    if a.folder.resolve() == b.folder.resolve():
        raise InputError(
            f"--against {opts.against} is index {name!r} itself: leave out --against to mine the pairs within one index"
        )
    why = _incomparable(a, b)
    if why:
        raise InputError(why)
    return a, b


def _incomparable(a, b) -> str | None:
    """Why the vectors of indexes a and b cannot be compared, in one line naming both and what differs; None when
    they can. Other encoders are said first (their width and preprocessing differ with them)."""
    from vhmine.index import encoder_differences

    diffs = encoder_differences(a.manifest, b.manifest)
    if not diffs:
        return None
    head = f"index {a.name!r} and index {b.name!r}"
    other = [d for d in diffs if d[1] == "encoder"]
    if other:
        kinds = " and ".join(d[0] for d in other)
        return (
            f"{head} were embedded with other {kinds} encoders ({'; '.join(f'{x} and {y}' for _, _, x, y in other)}):"
            " their vectors cannot be compared; embed one collection again with the other's encoders"
            " (vhmine embed --clip-model / --dino-model)"
        )
    said: dict[tuple, list[str]] = {}  # clip and dino that differ alike are said once: "clip and dino precision"
    for kind, what, x, y in diffs:
        said.setdefault((what, x, y), []).append(kind)
    parts = [f"{' and '.join(kinds)} {what} ({x} and {y})" for (what, x, y), kinds in said.items()]
    if all(d[1] == "precision" for d in diffs):  # one encoder in two precisions: comparable only approximately
        return (
            f"{head} differ in {', '.join(parts)}: their vectors agree only approximately, so a pair near a "
            "threshold would pass or fail by the precision alone; embed one collection again in the other's "
            f"precision under another --name (vhmine embed --precision {diffs[0][3]}: an index keeps its precision)"
        )
    return (
        f"{head} differ in {', '.join(parts)}: their vectors cannot be compared; embed one collection again with "
        "the other's encoders (vhmine embed --clip-model / --dino-model)"
    )
