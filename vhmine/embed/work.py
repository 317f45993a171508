"""The embed job's work folder, `indexes/<name>/work/`: job record, plan, shards, and what the files on
disk say about them (see embed.py for the job itself).

    work/job.json       encoders, their precision (how it was chosen), collection root and options of the job
    work/plan.parquet   path -> shard, append-only: a new file, or a file whose content changed since it
                        was read, gets a row in a new shard; a path's LAST row is its current one
    work/shards/part-NNNNN.{clip,dino}.npy and .parquet   one shard's vectors and rows (path, status,
                        sha256, size and mtime of the file as read, ...); the parquet, written last,
                        marks the shard done
    work/lock           held while a job runs

`write_shard` is the shard writer both engines (local and Ray) use. Reads the source's file sizes and
times and, where those changed, the files' bytes (sha256); writes only under work/.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from vhmine import __version__
from vhmine.embed.precision import kept, requested
from vhmine.errors import EncoderMismatchError
from vhmine.files import atomic_write, atomic_write_text
from vhmine.index import image_id_for, is_finished

log = logging.getLogger(__name__)

WORK = "work"
PLAN = "plan.parquet"
JOB = "job.json"
ROW_COLUMNS = ["path", "status", "reason", "sha256", "width", "height", "duplicate_of", "size", "mtime_ns"]
INDEXED = ("ok", "duplicate")  # rows whose content is in the index (a duplicate's vectors are its first copy's)


def unfinished_job(folder: Path) -> tuple[dict, int] | None:
    """(the job record, shards finished) of an index folder whose embed job has started, else None."""
    try:
        job = json.loads((Path(folder) / WORK / JOB).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(job, dict) or not job:
        return None
    return job, sum(1 for _ in (Path(folder) / WORK / "shards").glob("part-*.parquet"))


def shard_paths(work: Path, shard: int) -> dict[str, Path]:
    stem = work / "shards" / f"part-{shard:05d}"
    return {"rows": stem.with_suffix(".parquet"), "clip": Path(f"{stem}.clip.npy"), "dino": Path(f"{stem}.dino.npy")}


def started(work: Path) -> bool:
    """Whether the job ever finished a shard (or the index was ever finished): then it resumes, never restarts."""
    return is_finished(work.parent) or any((work / "shards").glob("part-*.parquet"))


def check_job(work: Path, opts, root: Path) -> dict:
    """Load or create job.json; refuse encoders, or a precision, other than those the index was started with.

    A job that never finished a shard (its encoders did not load, or it was stopped while loading)
    holds nothing to keep: a rerun with other encoders starts it again from scratch."""
    job_path = work / JOB
    wanted = {"clip_model": opts.clip_model, "dino_model": opts.dino_model}
    job = json.loads(job_path.read_text(encoding="utf-8")) if job_path.is_file() else None
    asked = requested(getattr(opts, "precision", None))
    other_precision = job is not None and asked != "auto" and kept(job) not in (None, asked)
    if job is not None and (any(job.get(k) != v for k, v in wanted.items()) or other_precision) and not started(work):
        log.info("the earlier embed job of %r never finished a shard: starting it again", work.parent.name)
        (work / PLAN).unlink(missing_ok=True)
        job = None
    if job is not None:
        for key, flag in (("clip_model", "--clip-model"), ("dino_model", "--dino-model")):
            if job[key] != wanted[key]:
                raise EncoderMismatchError(
                    f"index {work.parent.name!r} was built with {flag} {job[key]}, not {wanted[key]}: "
                    f"vectors from different encoders cannot share an index. Use another --name, "
                    f"pass {flag} {job[key]}, or delete {work.parent} to rebuild"
                )
        if other_precision:  # one precision an index: its pairs' similarities all carry the same rounding
            raise EncoderMismatchError(
                f"index {work.parent.name!r} was embedded in {kept(job)}, not {asked}: one index holds one "
                f"precision (mixed, whether a pair passes a threshold would depend on when its images were "
                f"embedded). Pass --precision {kept(job)} or auto (keeps it), use another --name, or delete "
                f"{work.parent} to rebuild in {asked}"
            )
        if job.get("root") != str(root):
            log.warning(
                "collection root changed from %s to %s; paths are relative, so the index still applies",
                job.get("root"),
                root,
            )
            job["root"] = str(root)
        if opts.coco_annotations:
            job["coco_annotations"] = str(Path(opts.coco_annotations).resolve())
    else:
        job = {
            **wanted,
            "root": str(root),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "coco_annotations": str(Path(opts.coco_annotations).resolve()) if opts.coco_annotations else None,
            "max_pixels": opts.max_pixels,
            "shard_size": opts.shard_size,
            "vhmine_version": __version__,
        }
    atomic_write_text(job_path, json.dumps(job, indent=2))
    return job


def read_plan(work: Path):
    import pandas as pd

    plan_path = work / PLAN
    return pd.read_parquet(plan_path) if plan_path.is_file() else pd.DataFrame({"path": [], "shard": []})


def update_plan(work: Path, plan, add: list[str], shard_size: int):
    """Give the files in `add` (new, or changed since they were read) new shards after the old ones."""
    import pandas as pd

    if add:
        first = int(plan["shard"].max()) + 1 if len(plan) else 0
        shards = [first + k // shard_size for k in range(len(add))]
        plan = pd.concat([plan, pd.DataFrame({"path": add, "shard": shards})], ignore_index=True)
        plan["shard"] = plan["shard"].astype("int64")
        atomic_write(work / PLAN, lambda tmp: plan.to_parquet(tmp, index=False))
    return plan


def write_shard(
    work: Path,
    shard: int,
    rows: list[dict],
    clip_rows: list,
    dino_rows: list,
    dims: tuple[int, int],
    extra_columns: tuple[str, ...] = (),
) -> None:
    """One shard's vectors, then its rows (the parquet, last, marks it done); each by temp file and rename."""
    import numpy as np
    import pandas as pd

    paths = shard_paths(work, shard)
    paths["rows"].parent.mkdir(parents=True, exist_ok=True)
    for kind, vecs, dim in (("clip", clip_rows, dims[0]), ("dino", dino_rows, dims[1])):
        arr = np.stack(vecs).astype(np.float32) if vecs else np.zeros((0, dim), np.float32)
        atomic_write(paths[kind], lambda tmp, a=arr: _save_npy(tmp, a))
    df = pd.DataFrame(rows, columns=ROW_COLUMNS + list(extra_columns))
    atomic_write(paths["rows"], lambda tmp: df.to_parquet(tmp, index=False))  # last: marks the shard done


def _save_npy(path: Path, arr) -> None:
    """np.save to exactly `path` (given a file name, it would append .npy), closing the file before the rename."""
    import numpy as np

    with open(path, "wb") as f:
        np.save(f, arr)


def load_done_shards(work: Path, shards: list[int]):
    """The rows of the given (finished) shards, in plan order; None for no shards."""
    import pandas as pd

    frames = []
    for s in shards:
        df = pd.read_parquet(shard_paths(work, s)["rows"])
        df["shard"] = s
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else None


def changed_paths(plan, done_rows, source, listing: dict[str, dict]) -> list[str]:
    """Files whose content differs from what their current (done) row recorded.

    Size and modification time decide cheaply; when they differ (or were not recorded), the file is
    hashed, so a file that was only touched or copied keeps its row."""
    from vhmine.images import BadImage, sha256_bytes

    if done_rows is None:
        return []
    last_shard = plan.groupby("path")["shard"].max()
    rows = done_rows.drop_duplicates("path", keep="last")
    out = []
    for r in rows.itertuples(index=False):
        if r.path not in listing or last_shard.get(r.path) != r.shard:  # gone, or already planned again
            continue
        try:
            size, mtime_ns = source.stat(listing[r.path])
        except OSError:
            continue
        if getattr(r, "size", None) == size and getattr(r, "mtime_ns", None) == mtime_ns:
            continue
        try:
            if r.sha256 and sha256_bytes(source.read(listing[r.path])) == r.sha256:
                continue
        except (OSError, BadImage):
            pass
        out.append(r.path)
    return out


def current_rows(rows, on_disk: set[str]):
    """(rows of the files the index holds now, in plan order; the files it held earlier and no longer does).

    A path's current row is its last one, if the file is still there. Each earlier content of a path
    that is gone from it is listed as removed: {path, sha256, image_id, reason: "deleted" | "changed"}."""
    latest = ~rows.duplicated("path", keep="last")
    here = rows["path"].isin(on_disk)
    present = rows[latest & here].reset_index(drop=True)
    now = dict(zip(present["path"], present["sha256"]))
    indexed = rows["status"].isin(INDEXED)
    removed, seen = [], set()
    for mask, reason in ((latest & ~here & indexed, "deleted"), (~latest & indexed, "changed")):
        for path, sha in zip(rows.loc[mask, "path"], rows.loc[mask, "sha256"]):
            if now.get(path) == sha or (path, sha) in seen:  # the same content is back at that path
                continue
            seen.add((path, sha))
            removed.append({"path": path, "sha256": sha, "image_id": image_id_for(sha), "reason": reason})
    return present, removed
