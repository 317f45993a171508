"""The run folder that both engines of `vhmine mine` write (runs/<run>/), and what a run reports; the
pieces every kind of run shares: the ranking and caps (rank_pairs), the rerun command, the index check.

`finish_run` writes, into a temporary folder that is then swapped in whole (files.replace_dir): the
pairs (through the caller's writer: job.py's table, or mine.write's shards), scatter.png and
gallery.html (mine.gallery), and run.json with every file's checksum. Reads nothing but the index's
manifest (its checksum goes into run.json). A write the system refuses (a full disk) is one line
(files.write_failed) and leaves no temporary folder.
"""

from __future__ import annotations

import json
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from vhmine import __version__
from vhmine.errors import InputError
from vhmine.files import replace_dir, shown_path, write_failed
from vhmine.images import sha256_file
from vhmine.index import manifest_sha256


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


def finish_run(
    run_dir: Path,
    idx,
    opts,
    counts: dict,
    write_pairs,
    alike,
    background,
    warnings,
    extra: dict | None = None,
    *,
    pairs: int | None = None,
    title: str | None = None,
) -> int:
    """Write the run folder (both engines): write_pairs(tmp) writes pairs.parquet and pairs.csv into the
    temporary folder and returns (pairs written, the gallery's rows); then the scatter of `alike` (clip,
    dino sims of CLIP-alike pairs) over `background`, the gallery, run.json; the folder is swapped in whole.
    opts: the run's job.MineOptions; pairs: how many pairs the run looked at [default: every pair of the
    index's images]; title: what the pictures call the run's images [default: the index's name]."""
    from vhmine.mine.gallery import write_gallery, write_scatter

    name = title or idx.name
    if pairs is None:
        pairs = counts["images"] * (counts["images"] - 1) // 2
    tmp = run_dir.parent / f".{run_dir.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        written, head = write_pairs(tmp)
        legend = write_scatter(
            tmp / "scatter.png",
            alike[0],
            alike[1],
            background,
            opts.clip,
            opts.dino,
            written=written,
            pairs=pairs,
            title=f"{name}: {counts['clip_alike']} CLIP-alike pairs, {counts['in_box']} in the box",
        )
        write_gallery(
            tmp / "gallery.html",
            head,
            total=written,
            title=f"{name}: top pairs",
            subtitle=f"CLIP >= {opts.clip:g}, DINOv2 <= {opts.dino:g}; ranked by gap = clip - dino",
            progress=opts.progress,
        )
        run = {
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
            "counts": {**counts, "written": int(written)},
            "warnings": warnings,
            "scatter_legend": legend,
            **(extra or {}),
        }
        run["files"] = {
            p.relative_to(tmp).as_posix(): {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
            for p in sorted(tmp.rglob("*"))
            if p.is_file()
        }
        (tmp / "run.json").write_text(json.dumps(run, indent=2, default=str), encoding="utf-8")
        replace_dir(tmp, run_dir, producer="vhmine mine")
    except OSError as err:  # a full disk, say: one line, as export says it
        shutil.rmtree(tmp, ignore_errors=True)
        raise write_failed(run_dir, err, *_kept(run_dir, opts)) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return int(written)


def job_folder(run_dir: Path) -> Path:
    """Where a Ray run keeps its job (mine.ray.tilejob: the finished tiles) until its run folder is written."""
    return Path(run_dir).parent / f".{Path(run_dir).name}.job"


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


def background_sample(n: int, sims, *, seed: int = 0, size: int = 20_000, across: int | None = None):
    """Similarities of random pairs (all of them when few), so the plot shows where most pairs lie;
    sims(i, j) -> (clip sims, dino sims) of those rows. across: the pairs are (row i of n, row j of another
    `across` rows), not pairs of the n rows."""
    import numpy as np

    if across is not None:
        if n * across <= size:
            i, j = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(across), indexing="ij"))
        else:
            rng = np.random.default_rng(seed)
            i, j = rng.integers(0, n, size), rng.integers(0, across, size)
        return sims(i, j)
    if n * (n - 1) // 2 <= size:  # small collection: every pair
        i, j = np.triu_indices(n, 1)
    else:
        rng = np.random.default_rng(seed)
        i, j = rng.integers(0, n, size), rng.integers(0, n, size)
        i, j = i[i != j], j[i != j]
    return sims(i, j)


def cross_sims(take_x, take_y, i, j, step: int = 4096):
    """recheck.pair_sims of row i of one collection and row j of another (the miner's float64 bits), rows
    fetched a batch at a time by take_x(rows) / take_y(rows) (sorted unique row numbers -> float32 rows)."""
    import numpy as np

    from vhmine.mine.join import pair_sims

    out = np.empty(len(i))
    for s in range(0, len(i), step):
        a, b = i[s : s + step], j[s : s + step]
        ua, ub = np.unique(a), np.unique(b)
        out[s : s + step] = pair_sims(
            np.concatenate([take_x(ua), take_y(ub)]), np.searchsorted(ua, a), len(ua) + np.searchsorted(ub, b)
        )
    return out


def against_record(b) -> dict:
    """run.json's `against`: the second index of an --against run."""
    return {
        "index": b.name,
        "index_folder": str(b.folder.resolve()),
        "index_manifest_sha256": manifest_sha256(b.folder),
    }


BACKGROUND_PAIRS = 20_000  # the scatter plot's background: every pair up to this many, else a sample of this size


def rank_pairs(
    id_a, id_b, gap, *, max_per_image: int | None = None, max_pairs: int | None = None, cuts: dict | None = None
):
    """Order of the kept pairs: gap descending, ties by image ids (never row order), then the caps. cuts: when
    given, gets how many pairs each cap left out ({"--max-per-image 3": n, "--max-pairs 100": m}, only caps
    that left some out; the pairs past --max-pairs are its, though --max-per-image might have cut some of them
    too)."""
    import numpy as np

    order = np.lexsort((id_b, id_a, -gap))
    total, per_image = len(order), 0
    if max_per_image:
        used: dict[str, int] = {}
        keep = []
        for k in order:
            a, b = id_a[k], id_b[k]
            if used.get(a, 0) < max_per_image and used.get(b, 0) < max_per_image:
                used[a] = used.get(a, 0) + 1
                used[b] = used.get(b, 0) + 1
                keep.append(k)
                if max_pairs and len(keep) >= max_pairs:
                    break
            else:
                per_image += 1
        order = np.asarray(keep, dtype=np.int64)
    if max_pairs:
        order = order[:max_pairs]
    if cuts is not None:
        if per_image:
            cuts[f"--max-per-image {max_per_image}"] = per_image
        if total - per_image > len(order):
            cuts[f"--max-pairs {max_pairs}"] = total - per_image - len(order)
    return order


def rerun_command(name: str, opts) -> str:
    """`vhmine mine` naming this run's index (and --indexes, --engine) for a rerun with other thresholds."""
    return (
        "vhmine mine --index "
        + name
        + (f" --against {opts.against}" if opts.against else "")
        + (f" --indexes {shown_path(opts.indexes)}" if opts.indexes else "")
        + (f" --engine {opts.engine}" if opts.engine != "local" else "")
    )


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
