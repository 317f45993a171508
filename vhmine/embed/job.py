"""Stage 1, embed: an image collection -> `indexes/<name>/` (vhmine.index holds the layout).

The roles, one module each, resumable by shard:
- reader (read.py, vhmine/tars.py): a source of image records (a folder, with COCO annotations or
  not, or WebDataset tar shards) and the dataset DataLoader workers run: each record read once,
  hashed, decoded (images.py) and preprocessed for both encoders; an unusable image becomes a row
  with its reason, never an exception.
- encoders (encoders.py): a batch in, two vector arrays out, in one precision (precision.py: named, or measured).
- shard writer (work.py): a shard's vectors (`.npy`) and rows (`.parquet`, written last: the
  commit mark), by temp-file-and-rename; the work folder's plan and job record.
- runner (run.py): whole shards through reader, encoders and writer.
- distributor, `--engine`: `local` runs the pending shards in this process; `ray` (ray_engine.py) hands
  them to one actor per GPU of a Ray cluster. Both write the same shard files.
This module is the job: it freezes the plan (`work/plan.parquet`, path -> shard; a later run appends
shards for new files and for files whose content changed, so it embeds only those), runs the pending
shards on the chosen engine, and finalizes: the current row of every file still there is joined
into images.parquet, clip.faiss, dino.faiss, skipped.csv and, last, manifest.json, which lists the
files that left as "removed". Exact duplicates (same sha256) are embedded once per shard and indexed
once; later copies are listed under the first. Vectors follow content: whichever copy of an image is
left, the image keeps its vectors and its id. An index has one precision (job.json and manifest.json record
it and how it was chosen): a later run keeps it, and one that names another is refused (work.check_job).
A job whose encoders never loaded leaves no index folder behind; a stopped job resumes. Reads the source;
writes only under indexes/<name>/.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from vhmine.config import DEFAULT_CLIP_MODEL, DEFAULT_DINO_MODEL, indexes_root, mine_command
from vhmine.embed.backend import requested as requested_backend
from vhmine.embed.precision import kept, precision_line, requested
from vhmine.embed.read import open_source, read_coco_annotations
from vhmine.embed.work import (
    INDEXED,
    JOB,
    WORK,
    changed_paths,
    check_job,
    current_rows,
    load_done_shards,
    read_plan,
    shard_paths,
    started,
    update_plan,
)
from vhmine.errors import IndexCorruptError, InputError, Interrupted
from vhmine.files import atomic_write_text, check_owned, check_writable
from vhmine.index import (
    FORMAT_VERSION,
    MANIFEST,
    SKIPPED,
    image_id_for,
    index_folder,
    is_finished,
    open_index,
    read_manifest,
    write_index,
)

log = logging.getLogger(__name__)
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # an index name given with --name


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
    precision: str | None = None  # fp32, bf16, fp16 or auto [default: VHMINE_PRECISION, else auto]; embed.precision
    backend: str | None = None  # torch, openvino or auto [default: VHMINE_EMBED_BACKEND, else auto]; embed.backend
    engine: str = "local"  # "local": this process; "ray": a Ray cluster (ray_engine.py)
    ray_address: str | None = None  # None: RAY_ADDRESS, a running local cluster, else start one
    ray_actors: int | None = None  # None: one per GPU of the cluster, else one per CPU


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
    precision: dict = field(default_factory=dict)  # the index's precision record (manifest.json's `precision`)
    growth: dict = field(default_factory=dict)  # an index embedded before: files new, changed and deleted since

    def summary(self) -> str:
        head = f"index {self.name!r} at {self.folder}: {self.images} images in the index"
        if self.skipped:
            head += f"; {self.skipped} skipped (see {SKIPPED})"
        read = f"{self.embedded_now} files read in this run"
        if self.growth:
            g = self.growth
            read += f": {g['new']} new, {g['changed']} changed; {g['deleted']} deleted since the last embed"
        lines = [f"{head} ({read}, {self.seconds:.1f} s)"]
        if self.precision.get("name"):
            lines.append("  " + precision_line(self.precision))
        if self.duplicates:
            lines.append(f"  {self.duplicates} exact duplicates recorded once (see {MANIFEST})")
        if self.skipped:
            reasons = ", ".join(f"{r}: {n}" for r, n in sorted(self.skipped_reasons.items()))
            lines.append(f"  {self.skipped} images skipped ({reasons}); listed in {self.folder / SKIPPED}")
        if not self.images:
            lines.append(
                "  the index holds no images: nothing can be mined from it; fix or replace the files "
                "listed in skipped.csv and run the same command again"
            )
        else:
            lines.append(f"next: {mine_command(self.folder)}")
        return "\n".join(lines)


# --- the job --------------------------------------------------------------------------------------


@contextlib.contextmanager
def _job_lock(work: Path, name: str):
    """One embed job per index at a time: a second one would interleave shards."""
    import fcntl

    from vhmine.files import flock_nowait, note_holder

    work.mkdir(parents=True, exist_ok=True)
    f, who = flock_nowait(work / "lock")
    if f is None:
        raise InputError(
            f"another `vhmine embed`{who} is running on index {name!r} ({work.parent}); nothing was "
            "written: wait for it to finish, then run this command again"
        )
    note_holder(f)
    try:
        yield
    finally:
        fcntl.flock(f, fcntl.LOCK_UN)
        f.close()


def embed_collection(opts: EmbedOptions) -> EmbedResult:
    """Embed (or finish embedding, or extend) a collection's index; see the module docstring."""
    t0 = time.time()
    if opts.engine not in ("local", "ray"):
        raise InputError(f"--engine {opts.engine}: use local or ray")
    requested(opts.precision)  # a word that is no precision is said before anything is read
    requested_backend(opts.backend)
    source = open_source(opts.images)
    name = opts.name or source.location.rstrip("/").rsplit("/", 1)[-1].removesuffix(".tar")
    if opts.name is not None and not _PLAIN_NAME.match(name):  # what the message says is what is accepted
        raise InputError(f"--name {name!r}: use letters, digits, '.', '-' and '_', starting with a letter or digit")
    if not name or "/" in name or name.startswith("."):  # a name taken from the folder: any the file system keeps
        raise InputError(f"the folder's name {name!r} cannot name an index: give one with --name (letters, digits, -)")
    coco = read_coco_annotations(opts.coco_annotations) if opts.coco_annotations else None
    listing = source.list()
    on_disk = list(listing)
    rel_paths = on_disk[: opts.limit] if opts.limit else on_disk
    if not rel_paths:
        raise InputError(f"{source.location}: no images found (looked for .jpg, .jpeg, .png, .webp, recursively)")
    folder = index_folder(indexes_root(opts.indexes), name)
    check_owned(folder, "vhmine embed", flag="--name", whole=False)  # never write into a folder of the user's
    check_writable(folder if folder.exists() else folder.parent, flag="--indexes")  # one line, not an OSError
    created = not folder.exists()
    work = folder / WORK
    with _job_lock(work, name):
        try:
            result = _embed_locked(opts, source, listing, name, folder, coco, rel_paths)
        except BaseException as err:
            if created and not started(work):  # e.g. encoders that do not load: leave no index behind
                shutil.rmtree(folder, ignore_errors=True)
            if isinstance(err, KeyboardInterrupt) and not isinstance(err, Interrupted):
                raise Interrupted(_interrupted(work)) from None
            raise
    result.seconds = time.time() - t0
    return result


def _interrupted(work: Path) -> str:
    """What a Ctrl-C leaves: the finished shards (each written whole) and that the same command resumes."""
    from vhmine.files import shown_path

    done = len(list((work / "shards").glob("part-*.parquet"))) if work.is_dir() else 0
    if not done:
        return "interrupted before the first shard was finished: nothing kept; run the same command to start again"
    try:
        total = len(read_plan(work)["shard"].unique())
    except Exception:  # the plan is only there to count: a message, never a second failure
        total = None
    of = f" of {total}" if total and total >= done else ""
    return f"interrupted: {done}{of} shards kept in {shown_path(work)}; run the same command to resume"


def _embed_locked(
    opts: EmbedOptions, source, listing: dict[str, dict], name: str, folder: Path, coco, rel_paths: list[str]
) -> EmbedResult:
    work = folder / WORK
    on_disk = set(listing)
    job = check_job(work, opts, source.location)
    job.setdefault("source", source.kind)
    plan = read_plan(work)
    done = [s for s in sorted(plan["shard"].unique().tolist()) if shard_paths(work, s)["rows"].is_file()]
    known = set(plan["path"])
    rows = load_done_shards(work, done)
    new, changed = [p for p in rel_paths if p not in known], changed_paths(plan, rows, source, listing)
    add = new + changed
    before = read_manifest(folder) if known and is_finished(folder) else None  # what the last embed indexed
    plan = update_plan(work, plan, add, opts.shard_size)
    all_shards = sorted(plan["shard"].unique().tolist())
    pending = [s for s in all_shards if not shard_paths(work, s)["rows"].is_file()]
    if pending or all_shards != done:  # shards written in this run (or new ones): read their rows afresh
        rows = None
    embedded_now, timings = 0, {}
    if pending:
        embedded_now, timings = _run_shards(work, plan, pending, source, listing, job, opts)
    elif is_finished(folder) and not opts.coco_annotations:
        try:  # sizes, rows and vectors against the manifest: a damaged index is rebuilt from its shards
            idx = open_index(folder.parent, name)
        except IndexCorruptError as err:
            if _written_by_newer_vhmine(folder):  # never overwrite what a newer version wrote
                raise
            log.warning("%s; rebuilding the index files from the finished shards in %s", err, work)
        else:
            if rows is None:
                rows = load_done_shards(work, all_shards)
            present, _ = current_rows(rows, on_disk)
            # a collection moved as a whole keeps its paths: rewrite the manifest so its root follows
            if set(present["path"]) == _paths_in(idx) and idx.manifest.get("root") == job["root"]:
                log.info("index %r is complete and up to date: nothing to embed", name)
                return _result_from_manifest(folder, name, 0.0)
    t1 = time.time()
    result = _finalize(folder, work, all_shards, job, coco, name, on_disk, rows)
    timings["finalize"] = time.time() - t1
    result.embedded_now = embedded_now
    result.timings = timings
    if before is not None:
        result.growth = {"new": len(new), "changed": len(changed), "deleted": _deleted_since(before, folder)}
    return result


def _deleted_since(before: dict, folder: Path) -> int:
    """Files the index's manifest lists as deleted now that the earlier manifest did not."""
    try:
        now = read_manifest(folder)
    except (OSError, ValueError):
        return 0

    def deleted(man: dict) -> set:
        return {r.get("path") for r in man.get("removed") or [] if isinstance(r, dict) and r.get("reason") == "deleted"}

    return len(deleted(now) - deleted(before))


def _paths_in(idx) -> set[str]:
    """Every file path an index accounts for: indexed, duplicate copies and skipped."""
    dups = idx.images["duplicate_paths"] if "duplicate_paths" in idx.images else []
    return (
        {*idx.images["path"]}
        | {p for more in dups for p in more}
        | {r["path"] for r in idx.manifest.get("skipped", [])}
    )


def _run_shards(
    work: Path, plan, pending: list[int], source, listing: dict[str, dict], job: dict, opts: EmbedOptions
) -> tuple[int, dict]:
    """Embed the pending shards on the chosen engine; returns (files read, seconds per phase)."""
    t0 = time.time()
    todo = plan[plan["shard"].isin(pending)]
    # a file listed in the plan but gone since (its shard not done yet) still gets a row: a skip
    shards = [
        (int(s), [listing.get(p) or {"path": p, "missing": True} for p in group["path"]])
        for s, group in todo.groupby("shard", sort=True)
    ]
    loaded = {}
    # a grown (or resumed) index keeps the precision it was embedded in; a new one takes what was asked
    precision = kept(job) or requested(opts.precision)

    def record_encoders(described: dict) -> None:
        described = json.loads(json.dumps(described))  # as job.json holds it: tuples are lists there
        job.setdefault("precision", described["precision"])  # as first chosen: later runs keep it
        if described.get("backend"):  # the runtime of the latest run (the machine's choice, not the index's)
            job["backend"] = described["backend"]
        described = described["encoders"]
        if job.get("encoders") and job["encoders"] != described:
            differ = sorted(
                f"{enc}.{k}"
                for enc in set(described) | set(job["encoders"])
                # what both hold: a newer vhmine records more of the same encoder (weights_sha256)
                for k in set(described.get(enc) or {}) & set(job["encoders"].get(enc) or {})
                if (described.get(enc) or {}).get(k) != (job["encoders"].get(enc) or {}).get(k)
            )
            if differ or set(described) != set(job["encoders"]):
                log.warning(
                    "encoder details differ from the ones this index started with (%s; device or dtype changed?)",
                    ", ".join(differ) or "their layout",
                )
        job["encoders"] = described
        atomic_write_text(work / JOB, json.dumps(job, indent=2))
        loaded["at"] = time.time()

    if opts.engine == "ray":
        from vhmine.embed.ray_engine import run_ray

        run_ray(opts, job, work, source, shards, record_encoders, precision)
    else:
        from vhmine.embed.run import ShardEmbedder, run_local

        # loading large encoders takes seconds before the first image: say what is happening meanwhile
        log.info(
            "loading the encoders (CLIP %s, DINOv2 %s) for %d images in %d shards",
            job["clip_model"],
            job["dino_model"],
            sum(len(r) for _, r in shards),
            len(shards),
        )
        embedder = ShardEmbedder(
            job["clip_model"],
            job["dino_model"],
            str(work),
            device=opts.device,
            batch_size=opts.batch_size,
            workers=opts.workers,
            max_pixels=job.get("max_pixels", opts.max_pixels),
            precision=precision,
            kept=bool(kept(job)),
            backend=opts.backend,
        )
        record_encoders(embedder.describe())
        log.info("%s", embedder.encoders.precision.line())
        log.info("%s", embedder.encoders.backend.line())
        run_local(embedder, source, shards, opts.progress)
    t_loaded = loaded.get("at", t0)
    return len(todo), {"load": t_loaded - t0, "encode": time.time() - t_loaded}


def _written_by_newer_vhmine(folder: Path) -> bool:
    try:
        return read_manifest(folder).get("format_version", 0) > FORMAT_VERSION
    except (OSError, ValueError, AttributeError):
        return False


def _result_from_manifest(folder: Path, name: str, seconds: float) -> EmbedResult:
    manifest = read_manifest(folder)
    counts = manifest.get("counts", {})
    return EmbedResult(
        name,
        folder,
        counts.get("images", 0),
        counts.get("skipped", 0),
        counts.get("duplicates", 0),
        0,
        seconds,
        _count_reasons(row["reason"] for row in manifest.get("skipped", [])),
        precision=manifest.get("precision") or {},
    )


def _count_reasons(reasons) -> dict[str, int]:
    """Skips per kind of reason: 'truncated file (...)' counts as 'truncated file'."""
    from collections import Counter

    return dict(Counter(r.split(":")[0].split("(")[0].strip() for r in reasons))


def keep_row_digests(folder: Path) -> None:
    """Each row's digest kept with the index as it is written (vhmine.index.keep_for_files: the chunks the kept
    file still vouches for read, the others hashed, the new rows among them, and the vector files' states
    recorded once they settle), so that a later `vhmine mine` of the grown index hashes none and, while the
    files keep those states, checks none (a row's BLAKE2b is microseconds beside its encoders' forward passes)."""
    import functools

    from vhmine.index import DIGEST, keep_for_files, row_digests

    keep_for_files(folder, DIGEST, functools.partial(row_digests, workers=2))


def _finalize(
    folder: Path,
    work: Path,
    all_shards: list[int],
    job: dict,
    coco: dict | None,
    name: str,
    on_disk: set[str],
    rows=None,
) -> EmbedResult:
    """Join the current rows of the files still there into the index files; manifest.json goes last,
    so its presence means complete. An image's vectors are found by its sha256, in whichever shard
    first embedded that content, so it keeps them when the copy that was embedded has gone.
    `rows` are the shards' rows when the caller has them already (None: read them here)."""
    import numpy as np
    import pandas as pd

    if rows is None:
        rows = load_done_shards(work, all_shards)
    clip = np.concatenate([np.load(shard_paths(work, s)["clip"]) for s in all_shards])
    dino = np.concatenate([np.load(shard_paths(work, s)["dino"]) for s in all_shards])
    embedded = rows.loc[rows["status"] == "ok", "sha256"]
    if len(embedded) != len(clip) or len(embedded) != len(dino):
        raise IndexCorruptError(
            f"index {name!r}: shard files disagree ({len(embedded)} rows, {len(clip)} vectors); delete {work} and rerun"
        )
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
    images = pd.DataFrame(
        {
            "image_id": ok["image_id"],
            "path": ok["path"],
            "sha256": ok["sha256"],
            "width": ok["width"].astype("int64"),
            "height": ok["height"].astype("int64"),
        }
    )
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
    wds = job.get("source") == "webdataset"
    for col in ("key", "tar", "url", "caption") if wds else ():  # img2dataset's fields, from the tars
        images[col] = ok[col].astype("string") if col in ok else pd.array([None] * len(ok), dtype="string")
    skipped = present.loc[present["status"] == "skipped", ["path", "reason"]].reset_index(drop=True)

    if not job.get("encoders"):
        raise IndexCorruptError(f"index {name!r}: no encoder record in {work / JOB}; delete {folder} and rerun")
    write_index(
        folder,
        images,
        clip,
        dino,
        skipped=skipped,
        manifest={
            "producer": "vhmine embed",
            "name": name,
            "created": job.get("created"),
            "root": job["root"],
            "source": {
                "kind": "coco" if coco is not None else job.get("source", "folder"),
                "coco_annotations": coco_path,
            },
            "encoders": job["encoders"],
            "precision": job.get("precision") or {"name": kept(job), "chosen": "index"},
            **({"backend": job["backend"]} if job.get("backend") else {}),  # the runtime: embed.backend
            "counts": {
                "files": int(len(present)),
                "images": int(len(images)),
                "skipped": int(len(skipped)),
                "duplicates": int(len(dups)),
            },
            "shards": {"count": len(all_shards), "size": job.get("shard_size")},
            "duplicates": [{"path": p, "image_id": i} for p, i in zip(dups["path"], dup_ids)],
            "removed": removed,  # files embedded earlier that are gone, or whose content changed
        },
    )
    keep_row_digests(folder)
    result = EmbedResult(name, folder, len(images), len(skipped), len(dups), 0, 0.0, _count_reasons(skipped["reason"]))
    result.precision = job.get("precision") or {}
    return result
