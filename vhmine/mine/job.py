"""Stage 2, mine: an index -> `runs/<run>/` with the pairs that CLIP calls alike and DINOv2 does not.

Reads `indexes/<name>/` (index.py); the exact search itself is simsearch.find_pairs (the pair set
equals a float64 brute force, both thresholds inclusive). Writes, all at once by renaming a
finished temporary folder into place:

    pairs.parquet / pairs.csv  rank, image ids, sha256s, absolute paths, clip_sim, dino_sim, gap,
                               COCO ids and categories of both images; ranked by gap
    run.json                   thresholds, encoders, index, counts, options, file checksums
    scatter.png, gallery.html  the candidate pairs against the threshold box; the top pairs
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from vhmine import __version__
from vhmine.config import DEFAULT_CLIP_MIN, DEFAULT_DINO_MAX, default_index_name, indexes_root, runs_root
from vhmine.errors import InputError
from vhmine.images import sha256_file
from vhmine.files import check_owned, check_writable, replace_dir
from vhmine.embed.index import open_index

log = logging.getLogger(__name__)


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
    engine: str = "local"  # "local": simsearch.find_pairs here; "ray": ray_engine.find_pairs_ray on a cluster
    ray_address: str | None = None
    tile_memory: int | None = None  # bytes per Ray tile [default: ray_engine.DEFAULT_TILE_MEMORY]
    gallery_size: int = 100
    progress: bool = True


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
    relax: list[str] = field(default_factory=list)  # with 0 pairs: counts at nearby thresholds (mine.relax)

    def summary(self) -> str:
        from vhmine.files import shown_path

        lines = [f"warning: {w}" for w in self.warnings]
        lines.append(
            f"{self.written} pairs written to {self.run_dir / 'pairs.parquet'} "
            f"({self.images} images; {self.clip_alike} pairs with CLIP >= threshold, "
            f"{self.in_box} of them with DINOv2 <= threshold; {self.seconds:.1f} s)"
        )
        lines.append(f"look at them: {self.run_dir / 'gallery.html'} and {self.run_dir / 'scatter.png'}")
        if self.written:
            lines.append(f"next: vhmine seed --pairs {shown_path(self.run_dir / 'pairs.parquet')}")
        return "\n".join(lines + self.relax)


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


def rank_pairs(id_a, id_b, gap, *, max_per_image: int | None = None, max_pairs: int | None = None):
    """Order of the kept pairs: gap descending, ties by image ids (never row order), then the caps."""
    import numpy as np

    order = np.lexsort((id_b, id_a, -gap))
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
        order = np.asarray(keep, dtype=np.int64)
    if max_pairs:
        order = order[:max_pairs]
    return order


def default_run_name(index: str, clip: float, dino: float) -> str:
    return f"{index}-clip{clip:g}-dino{dino:g}"


def mine_index(opts: MineOptions) -> MineResult:
    try:
        return _mine(opts)
    except KeyboardInterrupt:  # a run folder is published whole at the end: an interrupted one leaves nothing
        from vhmine.errors import Interrupted

        raise Interrupted("interrupted: no run written (mine publishes its run folder whole, at the end; an earlier "
                          "run there is as it was); run the same command to mine again") from None


def _mine(opts: MineOptions) -> MineResult:
    import numpy as np
    import pandas as pd

    from vhmine.mine.gallery import write_gallery, write_scatter
    from vhmine.mine.simsearch import find_pairs

    t0 = time.time()
    if opts.engine not in ("local", "ray"):
        raise InputError(f"--engine {opts.engine}: not an engine; use local or ray")
    warnings = check_thresholds(opts.clip, opts.dino)  # said once: in the summary (not also logged)
    root = indexes_root(opts.indexes)
    name = default_index_name(root, opts.index)
    run_dir = Path(opts.out) if opts.out else runs_root() / default_run_name(name, opts.clip, opts.dino)
    check_owned(run_dir, "vhmine mine")  # a run replaces its folder as a whole: only an earlier run
    check_writable(run_dir.parent, flag="--out")  # its files go beside it first: said in one line, before the search
    idx = open_index(root, name)
    n = len(idx.images)
    if n < 2:
        raise InputError(
            f"index {name!r} has {n} usable image{'s' if n != 1 else ''}: mining needs at least 2 "
            f"(see {idx.folder / 'skipped.csv'} for images that could not be read)"
        )
    # One search at the CLIP threshold gives every CLIP-alike pair with its DINOv2 sim: the pairs in
    # the box, and the rest of the candidates for the scatter plot.
    if opts.engine == "ray":
        from vhmine.mine.ray_engine import DEFAULT_TILE_MEMORY, find_pairs_ray

        found = find_pairs_ray(idx.clip, idx.dino, opts.clip, math.inf, address=opts.ray_address,
                               tile_memory=opts.tile_memory or DEFAULT_TILE_MEMORY, device=opts.device or "cpu",
                               progress=opts.progress)
    else:
        found = find_pairs(idx.clip, idx.dino, opts.clip, math.inf, device=opts.device, progress=opts.progress)
    in_box = found.dino_sim <= opts.dino
    i, j = found.i[in_box], found.j[in_box]
    clip_sim, dino_sim = found.clip_sim[in_box], found.dino_sim[in_box]
    images = idx.images
    ids = images["image_id"].to_numpy()
    # Orient each pair by image id so a pair's identity does not depend on row order.
    swap = ids[i] > ids[j]
    a = np.where(swap, j, i)
    b = np.where(swap, i, j)
    gap = clip_sim - dino_sim
    order = rank_pairs(ids[a], ids[b], gap, max_per_image=opts.max_per_image, max_pairs=opts.max_pairs)
    a, b, clip_sim, dino_sim, gap = a[order], b[order], clip_sim[order], dino_sim[order], gap[order]

    background = _background_sample(idx.clip, idx.dino, seed=0)
    relax = None
    if not len(order):  # say what to relax, from what this run holds (mine.relax)
        from vhmine.mine.relax import nearby

        relax = nearby(found, background, n, opts.clip, opts.dino, all_pairs=n * (n - 1) // 2 <= BACKGROUND_PAIRS,
                       base_command=_command(name, opts))
    abs_paths = np.asarray(idx.abs_paths(), dtype=object)
    pairs = pd.DataFrame({
        "rank": np.arange(1, len(order) + 1, dtype=np.int64),
        "image_id_a": ids[a], "image_id_b": ids[b],
        "sha256_a": images["sha256"].to_numpy()[a], "sha256_b": images["sha256"].to_numpy()[b],
        "path_a": abs_paths[a], "path_b": abs_paths[b],
        "clip_sim": clip_sim, "dino_sim": dino_sim, "gap": gap,
        "coco_id_a": images["coco_id"].array[a] if len(a) else pd.array([], dtype="Int64"),
        "coco_id_b": images["coco_id"].array[b] if len(b) else pd.array([], dtype="Int64"),
        "categories_a": [list(images["categories"].iat[k]) for k in a],
        "categories_b": [list(images["categories"].iat[k]) for k in b],
    })

    tmp = run_dir.parent / f".{run_dir.name}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        pairs.to_parquet(tmp / "pairs.parquet", index=False)
        csv = pairs.copy()
        for col in ("categories_a", "categories_b"):
            csv[col] = ["|".join(c) for c in csv[col]]
        csv.to_csv(tmp / "pairs.csv", index=False)
        write_scatter(tmp / "scatter.png", found.clip_sim, found.dino_sim, background, opts.clip, opts.dino, written=len(pairs),
                      title=f"{name}: {len(found)} CLIP-alike pairs, {int(in_box.sum())} in the box")
        write_gallery(tmp / "gallery.html", pairs.head(opts.gallery_size), total=len(pairs), title=f"{name}: top pairs",
                      subtitle=f"CLIP >= {opts.clip:g}, DINOv2 <= {opts.dino:g}; ranked by gap = clip - dino",
                      progress=opts.progress)
        run = {
            "producer": "vhmine mine",
            "vhmine_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "index": name,
            "index_folder": str(idx.folder.resolve()),
            "index_manifest_sha256": sha256_file(idx.folder / "manifest.json"),
            "clip_threshold": opts.clip,
            "dino_threshold": opts.dino,
            "thresholds_inclusive": True,
            "encoders": idx.manifest.get("encoders", {}),
            "options": {"max_pairs": opts.max_pairs, "max_per_image": opts.max_per_image, "engine": opts.engine},
            "counts": {"images": n, "clip_alike": int(len(found)), "in_box": int(in_box.sum()),
                       "written": int(len(pairs))},
            "warnings": warnings,
            **({"nearby": relax.record()} if relax else {}),
        }
        run["files"] = {p.name: {"bytes": p.stat().st_size, "sha256": sha256_file(p)} for p in sorted(tmp.iterdir())}
        (tmp / "run.json").write_text(json.dumps(run, indent=2, default=str), encoding="utf-8")
        replace_dir(tmp, run_dir, producer="vhmine mine")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return MineResult(run_dir, name, n, int(len(found)), int(in_box.sum()), int(len(pairs)),
                      time.time() - t0, warnings, relax.lines if relax else [])


def _command(name: str, opts: MineOptions) -> str:
    """`vhmine mine` naming this run's index (and --indexes, --engine) for a rerun with other thresholds."""
    from vhmine.files import shown_path

    return ("vhmine mine --index " + name + (f" --indexes {shown_path(opts.indexes)}" if opts.indexes else "")
            + (f" --engine {opts.engine}" if opts.engine != "local" else ""))


BACKGROUND_PAIRS = 20_000  # the scatter plot's background: every pair up to this many, else a sample of this size


def _background_sample(clip, dino, *, seed: int, size: int = BACKGROUND_PAIRS):
    """Similarities of random pairs (all of them when few), so the plot shows where most pairs lie."""
    import numpy as np

    n = len(clip)
    if n * (n - 1) // 2 <= size:  # small collection: every pair
        i, j = np.triu_indices(n, 1)
    else:
        rng = np.random.default_rng(seed)
        i, j = rng.integers(0, n, size), rng.integers(0, n, size)
        i, j = i[i != j], j[i != j]
    from vhmine.mine.simsearch import pair_sims

    return pair_sims(clip, i, j), pair_sims(dino, i, j)
