"""Stage 1, embed: an image collection -> `indexes/<name>/` (see index.py for the layout).

reader -> mapper -> writer, resumable by shard:
- plan: the collection's files are listed and frozen into `work/plan.parquet` (path -> shard); a later
  run on the same folder appends shards for new files and for files whose content changed (size and
  time, then sha256, tell), so it embeds only those (embed_work.py keeps the work folder).
- reader (embed_read.py): DataLoader workers read each file once, hash it, decode it (images.py)
  and run both encoders' preprocessing; an unusable image becomes a row with its reason, never an
  exception.
- mapper: both encoders, each loaded once, on the chosen device (half precision on GPU).
- writer: a shard's vectors (`.npy`) and rows (`.parquet`, written last: the commit mark) arrive
  by temp-file-and-rename; a killed job reruns only shards without their parquet.
- finalize: the current row of every file still there is joined into images.parquet, clip.faiss,
  dino.faiss, skipped.csv and, last, manifest.json, which lists the files that left as "removed".
Exact duplicates (same sha256) are embedded once; later copies are listed under the first. Vectors
follow content: whichever copy of an image is left, the image keeps its vectors and its id.
A job whose encoders never loaded leaves no index folder behind; a stopped job resumes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .config import DEFAULT_CLIP_MODEL, DEFAULT_DINO_MODEL, indexes_root
from .embed_read import ImageReader, collate, read_coco_annotations
from .embed_work import (INDEXED, JOB, WORK, changed_paths, check_job, current_rows, load_done_shards, read_plan,
                         shard_paths, started, update_plan, write_shard)
from .errors import IndexCorruptError, InputError
from .index import (FORMAT_VERSION, MANIFEST, SKIPPED, atomic_write_text, check_owned, image_id_for, index_folder,
                    open_index, write_index)

log = logging.getLogger(__name__)


@dataclass
class EmbedOptions:
    images: Path
    name: str | None = None
    coco_annotations: Path | None = None
    clip_model: str = DEFAULT_CLIP_MODEL
    dino_model: str = DEFAULT_DINO_MODEL
    indexes: Path | None = None
    device: str | None = None
    batch_size: int = 64
    workers: int | None = None  # None: 0 on a small CPU box, more beside a GPU
    shard_size: int = 1024
    max_pixels: int = 89_478_485
    limit: int | None = None  # embed only the first N files (sorted by path)
    progress: bool = True


@dataclass
class EmbedResult:
    name: str
    folder: Path
    images: int
    skipped: int
    duplicates: int
    embedded_now: int
    seconds: float
    skipped_reasons: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)  # seconds per phase: load (models), encode, finalize

    def summary(self) -> str:
        lines = [
            f"index {self.name!r} at {self.folder}: {self.images} images "
            f"({self.embedded_now} embedded in this run, {self.seconds:.1f} s)",
        ]
        if self.duplicates:
            lines.append(f"  {self.duplicates} exact duplicates recorded once (see {MANIFEST})")
        if self.skipped:
            reasons = ", ".join(f"{r}: {n}" for r, n in sorted(self.skipped_reasons.items()))
            lines.append(f"  {self.skipped} images skipped ({reasons}); listed in {self.folder / SKIPPED}")
        return "\n".join(lines)


# --- the job --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _job_lock(work: Path, name: str):
    """One embed job per index at a time: a second one would interleave shards."""
    import fcntl

    work.mkdir(parents=True, exist_ok=True)
    f = open(work / "lock", "a+")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise InputError(f"another `vhmine embed` is running on index {name!r} ({work.parent}); wait for it to finish") from None
    try:
        yield
    finally:
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


def embed_collection(opts: EmbedOptions) -> EmbedResult:
    """Embed (or finish embedding, or extend) a collection's index; see the module docstring."""
    from .images import list_images

    t0 = time.time()
    root = Path(opts.images).expanduser().resolve()
    if not root.is_dir():
        raise InputError(f"{opts.images}: no such folder; give the folder that holds the images")
    name = opts.name or root.name
    if not name or "/" in name or name.startswith("."):
        raise InputError(f"--name {name!r}: use a plain folder name (letters, digits, - and _)")
    coco = read_coco_annotations(opts.coco_annotations) if opts.coco_annotations else None
    on_disk = [p.relative_to(root).as_posix() for p in list_images(root)]
    rel_paths = on_disk[: opts.limit] if opts.limit else on_disk
    if not rel_paths:
        raise InputError(f"{root}: no images found (looked for .jpg, .jpeg, .png, .webp, recursively)")
    folder = index_folder(indexes_root(opts.indexes), name)
    check_owned(folder, "vhmine embed", flag="--name", whole=False)  # never write into a folder of the user's
    created = not folder.exists()
    work = folder / WORK
    with _job_lock(work, name):
        try:
            result = _embed_locked(opts, root, name, folder, coco, rel_paths, set(on_disk))
        except BaseException:
            if created and not started(work):  # e.g. encoders that do not load: leave no index behind
                shutil.rmtree(folder, ignore_errors=True)
            raise
    result.seconds = time.time() - t0
    return result


def _embed_locked(opts: EmbedOptions, root: Path, name: str, folder: Path, coco, rel_paths: list[str],
                  on_disk: set[str]) -> EmbedResult:
    work = folder / WORK
    job = check_job(work, opts, root)
    plan = read_plan(work)
    done = [s for s in sorted(plan["shard"].unique().tolist()) if shard_paths(work, s)["rows"].is_file()]
    known = set(plan["path"])
    add = [p for p in rel_paths if p not in known] + changed_paths(plan, load_done_shards(work, done), root, on_disk)
    plan = update_plan(work, plan, add, opts.shard_size)
    all_shards = sorted(plan["shard"].unique().tolist())
    pending = [s for s in all_shards if not shard_paths(work, s)["rows"].is_file()]
    embedded_now, timings = 0, {}
    if pending:
        embedded_now, timings = _run_shards(work, plan, pending, all_shards, root, job, opts)
    elif (folder / MANIFEST).is_file() and not opts.coco_annotations:
        try:  # sizes, rows and vectors against the manifest: a damaged index is rebuilt from its shards
            idx = open_index(folder.parent, name)
        except IndexCorruptError as err:
            if _written_by_newer_vhmine(folder):  # never overwrite what a newer version wrote
                raise
            log.warning("%s; rebuilding the index files from the finished shards in %s", err, work)
        else:
            present, _ = current_rows(load_done_shards(work, all_shards), on_disk)
            if set(present["path"]) == _paths_in(idx):
                log.info("index %r is complete and up to date: nothing to embed", name)
                return _result_from_manifest(folder, name, 0.0)
    t1 = time.time()
    result = _finalize(folder, work, all_shards, job, coco, name, on_disk)
    timings["finalize"] = time.time() - t1
    result.embedded_now = embedded_now
    result.timings = timings
    return result


def _paths_in(idx) -> set[str]:
    """Every file path an index accounts for: indexed, duplicate copies and skipped."""
    dups = idx.images["duplicate_paths"] if "duplicate_paths" in idx.images else []
    return ({*idx.images["path"]} | {p for more in dups for p in more}
            | {r["path"] for r in idx.manifest.get("skipped", [])})


def _auto_workers(device) -> int:
    """Decoding workers: on a small CPU box they would steal cores from the encoders' matrix products."""
    cores = os.cpu_count() or 1
    if device.type == "cpu":
        return 0 if cores <= 4 else 2
    return max(1, min(16, cores - 1))


def _run_shards(work: Path, plan, pending: list[int], all_shards: list[int], root: Path, job: dict,
                opts: EmbedOptions) -> tuple[int, dict]:
    """Embed the pending shards; returns (files read, seconds per phase)."""
    import torch
    from tqdm import tqdm

    from .encoders import load_clip, load_dino, resolve_device

    t0 = time.time()
    device = resolve_device(opts.device)
    clip_enc = load_clip(job["clip_model"], device)
    dino_enc = load_dino(job["dino_model"], device)
    described = {"clip": clip_enc.describe(), "dino": dino_enc.describe()}
    for enc, loaded in ((described["clip"], clip_enc), (described["dino"], dino_enc)):
        enc["dtype"] = str(loaded.dtype).replace("torch.", "")
    if job.get("encoders") and job["encoders"] != described:
        log.warning("encoder details differ from the ones this index started with (device or dtype changed?)")
    job["encoders"] = described
    atomic_write_text(work / JOB, json.dumps(job, indent=2))
    dims = (clip_enc.dim, dino_enc.dim)
    t_loaded = time.time()

    # Exact duplicates are found against everything already embedded, then within this run.
    done = [s for s in all_shards if s not in pending]
    done_rows = load_done_shards(work, done)
    seen: dict[str, str] = {}
    if done_rows is not None:
        for sha in done_rows.loc[done_rows["status"] == "ok", "sha256"]:
            seen.setdefault(sha, image_id_for(sha))

    todo = plan[plan["shard"].isin(pending)].sort_values("shard", kind="stable")
    paths = todo["path"].tolist()
    shard_of = todo["shard"].tolist()
    expected = todo.groupby("shard").size().to_dict()
    workers = opts.workers if opts.workers is not None else _auto_workers(device)
    reader = ImageReader(root, paths, clip_enc.preprocess, dino_enc.preprocess, job.get("max_pixels", opts.max_pixels))
    loader = torch.utils.data.DataLoader(
        reader, batch_size=opts.batch_size, shuffle=False, num_workers=workers, collate_fn=collate,
        pin_memory=device.type == "cuda", prefetch_factor=4 if workers else None,
    )
    buffers: dict[int, dict] = {}
    pos = 0
    bar = tqdm(total=len(paths), desc="embed", unit="img", disable=not opts.progress)
    for batch in loader:
        items = batch["items"]
        ok_idx = [k for k, it in enumerate(items) if it["status"] == "ok"]
        keep = []  # positions within the stacked ok tensors that are new images
        for t, k in enumerate(ok_idx):
            it = items[k]
            if it["sha256"] in seen:
                it["status"], it["duplicate_of"] = "duplicate", seen[it["sha256"]]
            else:
                seen[it["sha256"]] = image_id_for(it["sha256"])
                keep.append(t)
        clip_vecs = dino_vecs = None
        if keep:
            # Index only when duplicates drop out: a copy would also lose the loader's pinned memory.
            sel = None if len(keep) == len(ok_idx) else torch.tensor(keep)
            clip_vecs = clip_enc.encode(batch["clip"] if sel is None else batch["clip"][sel]).numpy()
            dino_vecs = dino_enc.encode(batch["dino"] if sel is None else batch["dino"][sel]).numpy()
        v = 0
        for it in items:
            shard = shard_of[pos]
            pos += 1
            buf = buffers.setdefault(shard, {"rows": [], "clip": [], "dino": []})
            it.setdefault("duplicate_of", None)
            buf["rows"].append(it)
            if it["status"] == "ok":
                buf["clip"].append(clip_vecs[v])
                buf["dino"].append(dino_vecs[v])
                v += 1
            if len(buf["rows"]) == expected[shard]:
                write_shard(work, shard, buf["rows"], buf["clip"], buf["dino"], dims)
                del buffers[shard]
        bar.update(len(items))
    bar.close()
    assert not buffers, f"shards left unwritten: {sorted(buffers)}"
    return len(paths), {"load": t_loaded - t0, "encode": time.time() - t_loaded}


def _written_by_newer_vhmine(folder: Path) -> bool:
    try:
        return json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("format_version", 0) > FORMAT_VERSION
    except (OSError, ValueError, AttributeError):
        return False


def _result_from_manifest(folder: Path, name: str, seconds: float) -> EmbedResult:
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    counts = manifest.get("counts", {})
    return EmbedResult(name, folder, counts.get("images", 0), counts.get("skipped", 0), counts.get("duplicates", 0),
                       0, seconds, _count_reasons(row["reason"] for row in manifest.get("skipped", [])))


def _count_reasons(reasons) -> dict[str, int]:
    """Skips per kind of reason: 'truncated file (...)' counts as 'truncated file'."""
    from collections import Counter

    return dict(Counter(r.split(":")[0].split("(")[0].strip() for r in reasons))


def _finalize(folder: Path, work: Path, all_shards: list[int], job: dict, coco: dict | None, name: str,
              on_disk: set[str]) -> EmbedResult:
    """Join the current rows of the files still there into the index files; manifest.json goes last,
    so its presence means complete. An image's vectors are found by its sha256, in whichever shard
    first embedded that content, so it keeps them when the copy that was embedded has gone."""
    import numpy as np
    import pandas as pd

    rows = load_done_shards(work, all_shards)
    clip = np.concatenate([np.load(shard_paths(work, s)["clip"]) for s in all_shards])
    dino = np.concatenate([np.load(shard_paths(work, s)["dino"]) for s in all_shards])
    embedded = rows.loc[rows["status"] == "ok", "sha256"]
    if len(embedded) != len(clip) or len(embedded) != len(dino):
        raise IndexCorruptError(f"index {name!r}: shard files disagree ({len(embedded)} rows, {len(clip)} vectors); delete {work} and rerun")
    vector_of: dict[str, int] = {}
    for k, sha in enumerate(embedded):
        vector_of.setdefault(sha, k)
    present, removed = current_rows(rows, on_disk)
    usable = present[present["status"].isin(INDEXED)]
    first = ~usable["sha256"].duplicated()
    ok, dups = usable[first].reset_index(drop=True), usable[~first]
    lost = [p for p, sha in zip(ok["path"], ok["sha256"]) if sha not in vector_of]
    if lost:
        raise IndexCorruptError(f"index {name!r}: no vectors in {work} for {lost[0]}; delete {work} and rerun")
    take = [vector_of[sha] for sha in ok["sha256"]]
    clip, dino = clip[take], dino[take]
    ok["image_id"] = ok["sha256"].map(image_id_for)
    dup_ids = dups["sha256"].map(image_id_for)
    dup_paths = dups.groupby(dup_ids)["path"].apply(list).to_dict()
    images = pd.DataFrame({
        "image_id": ok["image_id"],
        "path": ok["path"],
        "sha256": ok["sha256"],
        "width": ok["width"].astype("int64"),
        "height": ok["height"].astype("int64"),
    })
    coco_path = job.get("coco_annotations")
    if coco is None and coco_path:
        coco = read_coco_annotations(Path(coco_path))
    if coco is not None:
        meta = [coco.get(p) or coco.get(p.rsplit("/", 1)[-1]) for p in images["path"]]
        images["coco_id"] = pd.array([m["coco_id"] if m else None for m in meta], dtype="Int64")
        images["categories"] = [m["categories"] if m else [] for m in meta]
    else:
        images["coco_id"] = pd.array([None] * len(images), dtype="Int64")
        images["categories"] = [[] for _ in range(len(images))]
    images["duplicate_paths"] = [dup_paths.get(i, []) for i in images["image_id"]]
    skipped = present.loc[present["status"] == "skipped", ["path", "reason"]].reset_index(drop=True)

    if not job.get("encoders"):
        raise IndexCorruptError(f"index {name!r}: no encoder record in {work / JOB}; delete {folder} and rerun")
    write_index(folder, images, clip, dino, skipped=skipped, manifest={
        "producer": "vhmine embed",
        "name": name,
        "created": job.get("created"),
        "root": job["root"],
        "source": {"kind": "coco" if coco is not None else "folder", "coco_annotations": coco_path},
        "encoders": job["encoders"],
        "counts": {"files": int(len(present)), "images": int(len(images)), "skipped": int(len(skipped)),
                   "duplicates": int(len(dups))},
        "shards": {"count": len(all_shards), "size": job.get("shard_size")},
        "duplicates": [{"path": p, "image_id": i} for p, i in zip(dups["path"], dup_ids)],
        "removed": removed,  # files embedded earlier that are gone, or whose content changed
    })
    return EmbedResult(name, folder, len(images), len(skipped), len(dups), 0, 0.0, _count_reasons(skipped["reason"]))

