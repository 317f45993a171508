"""The run folder of `vhmine mine` (runs/<run>/), published whole, and what a run reports (MineResult).

`publish` writes, into a temporary folder that is then swapped in whole (files.replace_dir): the pairs (and,
for one index, the growth state) through the engine's Mined.write_pairs (mine.write, mine.state),
scatter.png and gallery.html (mine.gallery), and run.json with every file's checksum. Reads nothing but
the index's manifest (its checksum goes into run.json). A write the system refuses (a full disk) is one line
(files.write_failed) and leaves no temporary folder.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from vhmine import __version__
from vhmine.files import replace_dir, shown_path, write_failed
from vhmine.images import sha256_file
from vhmine.index import manifest_sha256
from vhmine.mine.plan import job_folder


@dataclass
class MineResult:
    run_dir: Path
    index: str
    images: int
    clip_alike: int  # pairs with clip_sim >= --clip
    in_box: int  # of those, dino_sim <= --dino
    written: int  # after --max-per-image and --max-pairs
    seconds: float
    warnings: list[str] = field(default_factory=list)
    job: dict = field(default_factory=dict)  # Ray: what mine.ray.engine.run_job reports (tiles, resumed, workers)
    relax: list[str] = field(default_factory=list)  # with 0 pairs: counts at nearby thresholds (mine.relax)
    kernel: str = ""  # the products kernel and the candidates' rates (calibrate.Choice.line), or the Ray nodes' kernels
    reuse: str = ""  # a run that reused an earlier one: what it mined (mine.grow.said)
    cuts: dict = field(default_factory=dict)  # how many in-box pairs each cap left out (rank_pairs' cuts)
    shared: int = 0  # --against: images in both indexes (each pair of two of them counted once, none with itself)

    def summary(self) -> str:
        lines = []  # (the warnings were logged before the search)
        if self.job.get("tiles_done_before"):
            lines.append(
                f"resumed: {self.job['tiles_done_before']} of {self.job['tiles_wanted']} tiles were "
                "already done and were not mined again"
            )
        if self.kernel:
            lines.append(self.kernel)
        if self.reuse:
            lines.append(self.reuse)
        if self.shared:
            lines.append(
                f"{self.shared:,} image(s) are in both indexes: no pair of an image with itself, and each pair "
                "of two of them counted once (side a from this index)"
            )
        lines.append(
            f"{self.written} pairs written to {self.run_dir / 'pairs.parquet'} "
            f"({self.images} images; {self.clip_alike} pairs with CLIP >= threshold, "
            f"{self.in_box} of them with DINOv2 <= threshold; {self.seconds:.1f} s)"
        )
        if self.cuts:
            lines.append(
                f"{self.in_box - self.written:,} of the {self.in_box:,} pairs in the box were cut: "
                + ", ".join(f"{cap} left out {n:,}" for cap, n in self.cuts.items())
            )
        lines.append(f"look at them: {self.run_dir / 'gallery.html'} and {self.run_dir / 'scatter.png'}")
        if self.written:
            lines.append(f"next: vhmine seed --pairs {shown_path(self.run_dir / 'pairs.parquet')}")
        return "\n".join(lines + self.relax)


def publish(plan, mined) -> MineResult:
    """The run folder of the plan's run (mine.plan.RunPlan) from what its engine mined (mine.engine.Mined),
    written whole and swapped in; then the engine's done() (a Ray job folder goes), or its failed() when the
    folder could not be written. Returns the run's MineResult."""
    ctx, counts = plan.ctx, mined.counts
    result = MineResult(ctx.run_dir, mined.name, counts["images"], counts["clip_alike"], counts["in_box"], 0, 0.0)
    result.warnings, result.job, result.relax, result.kernel = list(ctx.warnings), mined.job, mined.relax, mined.kernel
    result.reuse, result.cuts, result.shared = mined.reuse, mined.cuts, mined.shared
    try:
        with _settled():
            result.written = _write_folder(plan, mined)
    except BaseException:
        if mined.failed is not None:
            mined.failed()
        raise
    if mined.done is not None:
        mined.done()
    result.seconds = time.time() - ctx.started
    return result


@contextlib.contextmanager
def _settled():
    """While the run folder is written, the objects alive before it (the imports, torch's alone some 200,000;
    the index; the pairs) are left out of the cyclic garbage collector's passes, and handed back after: each
    full pass walks every tracked object (0.1 CPU-s at 270,000), and the scatter's import of matplotlib set
    one off. Left alone where a caller froze objects of its own."""
    import gc

    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _write_folder(plan, mined) -> int:
    """Write the run folder: mined.write_pairs(tmp) writes the pairs into the temporary folder and returns
    (pairs written, the gallery's rows); then the scatter of mined.alike over mined.background, the gallery,
    and run.json (_record's, with the written count, the scatter's legend and every file's checksum); the folder
    is swapped in whole."""
    from vhmine.mine.gallery import write_gallery
    from vhmine.mine.scatter import write_scatter

    run = _record(plan, mined)
    ctx, opts, idx, counts = plan.ctx, plan.ctx.opts, plan.a, mined.counts
    name = mined.title or idx.name
    pairs = mined.pairs if mined.pairs is not None else counts["images"] * (counts["images"] - 1) // 2
    run_dir = ctx.run_dir
    tmp = run_dir.parent / f".{run_dir.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        written, head = mined.write_pairs(tmp)
        title = f"{name}: {counts['clip_alike']} CLIP-alike pairs, {counts['in_box']} in the box"
        scatter = dict(written=written, pairs=pairs, title=title)
        legend = write_scatter(tmp / "scatter.png", *mined.alike, mined.background, opts.clip, opts.dino, **scatter)
        write_gallery(
            tmp / "gallery.html",
            head,
            total=written,
            title=f"{name}: top pairs",
            subtitle=f"CLIP >= {opts.clip:g}, DINOv2 <= {opts.dino:g}; ranked by gap = clip - dino",
            progress=opts.progress,
        )
        run["counts"]["written"], run["scatter_legend"] = int(written), legend
        run["files"] = {}
        for p in filter(Path.is_file, sorted(tmp.rglob("*"))):
            run["files"][p.relative_to(tmp).as_posix()] = {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
        (tmp / "run.json").write_text(json.dumps(run, indent=2, default=str), encoding="utf-8")
        replace_dir(tmp, run_dir, producer="vhmine mine")
    except OSError as err:  # a full disk, say: one line, as export says it
        shutil.rmtree(tmp, ignore_errors=True)
        raise write_failed(run_dir, err, *_kept(run_dir, opts)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return int(written)


def _record(plan, mined) -> dict:
    """run.json, but what writing the folder tells (the pairs written, the scatter's legend: None until then;
    the files' checksums)."""
    opts, idx = plan.ctx.opts, plan.a
    return {
        "producer": "vhmine mine",
        "vhmine_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "run_id": uuid.uuid4().hex,  # what a later run that reuses this one names it by (mine.grow)
        "index": idx.name,
        "index_created": idx.manifest.get("created"),
        "index_folder": str(idx.folder.resolve()),
        "index_manifest_sha256": manifest_sha256(idx.folder),
        "clip_threshold": opts.clip,
        "dino_threshold": opts.dino,
        "thresholds_inclusive": True,
        "encoders": idx.manifest.get("encoders", {}),
        "options": {"max_pairs": opts.max_pairs, "max_per_image": opts.max_per_image, "engine": opts.engine},
        "counts": {**mined.counts, "written": None},
        "warnings": list(plan.ctx.warnings),
        "scatter_legend": None,
        **({"against": against_record(plan.b)} if plan.b is not None else {}),
        **mined.extra,
    }


def against_record(b) -> dict:
    """run.json's `against`: the second index of an --against run."""
    return {
        "index": b.name,
        "index_folder": str(b.folder.resolve()),
        "index_manifest_sha256": manifest_sha256(b.folder),
    }


def _kept(run_dir: Path, opts) -> tuple[str, str]:
    """What a run that could not be written leaves, and what to do (write_failed's kept and then)."""
    if opts.engine == "ray":
        return (
            f"no run was written; the finished tiles are kept in {shown_path(job_folder(run_dir))}",
            "free some space and run the same command: it resumes from them",
        )
    return (
        "no run was written (an earlier run there is as it was)",
        "free some space, or choose another --out, and run the same command again",
    )
