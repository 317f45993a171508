"""Stage 1, embed: an image collection -> `indexes/<name>/` (see index.py for the layout).

reader -> mapper -> writer, resumable by shard:
- plan: the collection's files are listed once and frozen into `work/plan.parquet` (path -> shard);
  a later run on the same folder appends shards for new files only, so it embeds only those.
- reader: DataLoader workers read each file once, hash it, decode it (images.py) and run both
  encoders' preprocessing; an unusable image becomes a row with its reason, never an exception.
- mapper: both encoders, each loaded once, on the chosen device (half precision on GPU).
- writer: a shard's vectors (`.npy`) and rows (`.parquet`, written last: the commit mark) arrive
  by temp-file-and-rename; a killed job reruns only shards without their parquet.
- finalize: all shards are joined into images.parquet, clip.faiss, dino.faiss, skipped.csv and,
  last, manifest.json.
Exact duplicates (same sha256) are embedded once; later copies are listed under the first.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__
from .config import DEFAULT_CLIP_MODEL, DEFAULT_DINO_MODEL, indexes_root
from .errors import EncoderMismatchError, IndexCorruptError, InputError
from .index import (FORMAT_VERSION, MANIFEST, SKIPPED, atomic_write, atomic_write_text, image_id_for, index_folder,
                    open_index, write_index)

log = logging.getLogger(__name__)

WORK = "work"
PLAN = "plan.parquet"
JOB = "job.json"


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


# --- collection metadata -------------------------------------------------------------------------


def read_coco_annotations(path: Path) -> dict[str, dict]:
    """file_name -> {"coco_id": int, "categories": sorted category names} from a COCO instances JSON."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"--coco-annotations {path}: file not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"--coco-annotations {path}: not valid JSON ({err})") from err
    if not isinstance(data, dict) or "images" not in data:
        raise InputError(f"--coco-annotations {path}: no 'images' list; expected a COCO instances_*.json file")
    where, n = "categories", 0
    try:
        names = {c["id"]: c["name"] for c in data.get("categories", [])}
        per_image: dict[int, set] = {}
        where = "annotations"
        for n, ann in enumerate(data.get("annotations", [])):
            per_image.setdefault(ann["image_id"], set()).add(names.get(ann["category_id"], str(ann["category_id"])))
        out = {}
        where = "images"
        for n, img in enumerate(data["images"]):
            out[img["file_name"]] = {"coco_id": int(img["id"]), "categories": sorted(per_image.get(img["id"], ()))}
    except (KeyError, TypeError, ValueError) as err:
        raise InputError(f"--coco-annotations {path}: entry {n} of '{where}' lacks or mangles field {err}; "
                         "expected a COCO instances_*.json file") from None
    return out


# --- reader: runs in DataLoader workers ----------------------------------------------------------


class ImageReader:
    """Map-style dataset: item k = one file, read once, hashed, decoded, preprocessed for both encoders."""

    def __init__(self, root: Path, paths: list[str], clip_preprocess, dino_preprocess, max_pixels: int):
        self.root = Path(root)
        self.paths = paths
        self.clip_preprocess = clip_preprocess
        self.dino_preprocess = dino_preprocess
        self.max_pixels = max_pixels

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, k: int) -> dict:
        from .images import BadImage, decode_rgb, sha256_bytes

        rel = self.paths[k]
        item = {"path": rel, "status": "skipped", "reason": "", "sha256": "", "width": 0, "height": 0}
        try:
            data = (self.root / rel).read_bytes()
        except OSError as err:
            item["reason"] = f"unreadable file ({err.strerror or err})"
            return item
        item["sha256"] = sha256_bytes(data)
        try:
            img = decode_rgb(data, max_pixels=self.max_pixels)
        except BadImage as err:
            item["reason"] = err.reason
            return item
        try:
            with _one_torch_thread():
                item["clip"] = self.clip_preprocess(img)
                item["dino"] = self.dino_preprocess(img)
        except Exception as err:  # a preprocessing bug on one odd image must not stop the job
            item["reason"] = f"preprocessing failed ({type(err).__name__}: {err})"
            return item
        item.update(status="ok", width=img.width, height=img.height)
        return item


@contextlib.contextmanager
def _one_torch_thread():
    """Preprocessing's small tensor ops run far faster on one thread (loader workers already do)."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(prev)


def collate(items: list[dict]) -> dict:
    """Keep every row's metadata; stack the tensors of the decodable ones."""
    import torch

    ok = [it for it in items if it["status"] == "ok"]
    meta = [{k: v for k, v in it.items() if k not in ("clip", "dino")} for it in items]
    out = {"items": meta, "clip": None, "dino": None}
    if ok:
        out["clip"] = torch.stack([it["clip"] for it in ok])
        out["dino"] = torch.stack([it["dino"] for it in ok])
    return out


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


def _shard_paths(work: Path, shard: int) -> dict[str, Path]:
    stem = work / "shards" / f"part-{shard:05d}"
    return {"rows": stem.with_suffix(".parquet"), "clip": Path(f"{stem}.clip.npy"), "dino": Path(f"{stem}.dino.npy")}


def _check_job(work: Path, opts: EmbedOptions, root: Path) -> dict:
    """Load or create job.json; refuse encoders other than those the index was started with."""
    job_path = work / JOB
    wanted = {"clip_model": opts.clip_model, "dino_model": opts.dino_model}
    if job_path.is_file():
        job = json.loads(job_path.read_text(encoding="utf-8"))
        for key, flag in (("clip_model", "--clip-model"), ("dino_model", "--dino-model")):
            if job[key] != wanted[key]:
                raise EncoderMismatchError(
                    f"index {work.parent.name!r} was built with {flag} {job[key]}, not {wanted[key]}: "
                    f"vectors from different encoders cannot share an index. Use another --name, "
                    f"pass {flag} {job[key]}, or delete {work.parent} to rebuild"
                )
        if job.get("root") != str(root):
            log.warning("collection root changed from %s to %s; paths are relative, so the index still applies",
                        job.get("root"), root)
            job["root"] = str(root)
        if opts.coco_annotations:
            job["coco_annotations"] = str(Path(opts.coco_annotations).resolve())
    else:
        job = {**wanted, "root": str(root), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
               "coco_annotations": str(Path(opts.coco_annotations).resolve()) if opts.coco_annotations else None,
               "max_pixels": opts.max_pixels, "shard_size": opts.shard_size, "vhmine_version": __version__}
    atomic_write_text(job_path, json.dumps(job, indent=2))
    return job


def _update_plan(work: Path, rel_paths: list[str], shard_size: int):
    """Freeze which file belongs to which shard; new files get new shards after the old ones."""
    import pandas as pd

    plan_path = work / PLAN
    plan = pd.read_parquet(plan_path) if plan_path.is_file() else pd.DataFrame({"path": [], "shard": []})
    known = set(plan["path"])
    new = [p for p in rel_paths if p not in known]
    if new:
        first = int(plan["shard"].max()) + 1 if len(plan) else 0
        shards = [first + k // shard_size for k in range(len(new))]
        plan = pd.concat([plan, pd.DataFrame({"path": new, "shard": shards})], ignore_index=True)
        plan["shard"] = plan["shard"].astype("int64")
        atomic_write(plan_path, lambda tmp: plan.to_parquet(tmp, index=False))
    return plan, len(new)


def _write_shard(work: Path, shard: int, rows: list[dict], clip_rows: list, dino_rows: list, dims: tuple[int, int]) -> None:
    import numpy as np
    import pandas as pd

    paths = _shard_paths(work, shard)
    paths["rows"].parent.mkdir(parents=True, exist_ok=True)
    for kind, vecs, dim in (("clip", clip_rows, dims[0]), ("dino", dino_rows, dims[1])):
        arr = np.stack(vecs).astype(np.float32) if vecs else np.zeros((0, dim), np.float32)
        atomic_write(paths[kind], lambda tmp, a=arr: _save_npy(tmp, a))
    df = pd.DataFrame(rows, columns=["path", "status", "reason", "sha256", "width", "height", "duplicate_of"])
    atomic_write(paths["rows"], lambda tmp: df.to_parquet(tmp, index=False))  # last: marks the shard done


def _save_npy(path: Path, arr) -> None:
    """np.save to exactly `path` (given a file name, it would append .npy), closing the file before the rename."""
    import numpy as np

    with open(path, "wb") as f:
        np.save(f, arr)


def _load_done_shards(work: Path, shards: list[int]):
    import pandas as pd

    frames = []
    for s in shards:
        df = pd.read_parquet(_shard_paths(work, s)["rows"])
        df["shard"] = s
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else None


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
    files = list_images(root)
    rel_paths = [p.relative_to(root).as_posix() for p in files]
    if opts.limit:
        rel_paths = rel_paths[: opts.limit]
    if not rel_paths:
        raise InputError(f"{root}: no images found (looked for .jpg, .jpeg, .png, .webp, recursively)")
    folder = index_folder(indexes_root(opts.indexes), name)
    work = folder / WORK
    with _job_lock(work, name):
        job = _check_job(work, opts, root)
        plan, n_new = _update_plan(work, rel_paths, opts.shard_size)
        all_shards = sorted(plan["shard"].unique().tolist())
        pending = [s for s in all_shards if not _shard_paths(work, s)["rows"].is_file()]
        embedded_now, timings = 0, {}
        if pending:
            embedded_now, timings = _run_shards(work, plan, pending, all_shards, root, job, opts)
        elif (folder / MANIFEST).is_file() and not n_new and not opts.coco_annotations:
            try:  # sizes, rows and vectors against the manifest: a damaged index is rebuilt from its shards
                open_index(folder.parent, name)
            except IndexCorruptError as err:
                if _written_by_newer_vhmine(folder):  # never overwrite what a newer version wrote
                    raise
                log.warning("%s; rebuilding the index files from the finished shards in %s", err, work)
            else:
                log.info("index %r is complete and up to date: nothing to embed", name)
                return _result_from_manifest(folder, name, time.time() - t0)
        t1 = time.time()
        result = _finalize(folder, work, all_shards, job, coco, name)
        timings["finalize"] = time.time() - t1
    result.embedded_now = embedded_now
    result.seconds = time.time() - t0
    result.timings = timings
    return result


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
    done_rows = _load_done_shards(work, done)
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
                _write_shard(work, shard, buf["rows"], buf["clip"], buf["dino"], dims)
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


def _finalize(folder: Path, work: Path, all_shards: list[int], job: dict, coco: dict | None, name: str) -> EmbedResult:
    """Join the shards into the index files; manifest.json goes last, so its presence means complete."""
    import numpy as np
    import pandas as pd

    rows = _load_done_shards(work, all_shards)
    clip = np.concatenate([np.load(_shard_paths(work, s)["clip"]) for s in all_shards])
    dino = np.concatenate([np.load(_shard_paths(work, s)["dino"]) for s in all_shards])
    ok = rows[rows["status"] == "ok"].reset_index(drop=True)
    if len(ok) != len(clip) or len(ok) != len(dino):
        raise IndexCorruptError(f"index {name!r}: shard files disagree ({len(ok)} rows, {len(clip)} vectors); delete {work} and rerun")
    ok["image_id"] = ok["sha256"].map(image_id_for)
    dups = rows[rows["status"] == "duplicate"]
    dup_paths = dups.groupby("duplicate_of")["path"].apply(list).to_dict()
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
    skipped = rows.loc[rows["status"] == "skipped", ["path", "reason"]].reset_index(drop=True)

    if not job.get("encoders"):
        raise IndexCorruptError(f"index {name!r}: no encoder record in {work / JOB}; delete {folder} and rerun")
    write_index(folder, images, clip, dino, skipped=skipped, manifest={
        "producer": "vhmine embed",
        "name": name,
        "created": job.get("created"),
        "root": job["root"],
        "source": {"kind": "coco" if coco is not None else "folder", "coco_annotations": coco_path},
        "encoders": job["encoders"],
        "counts": {"files": int(len(rows)), "images": int(len(images)), "skipped": int(len(skipped)),
                   "duplicates": int(len(dups))},
        "shards": {"count": len(all_shards), "size": job.get("shard_size")},
        "duplicates": [{"path": p, "image_id": i} for p, i in zip(dups["path"], dups["duplicate_of"])],
    })
    return EmbedResult(name, folder, len(images), len(skipped), len(dups), 0, 0.0, _count_reasons(skipped["reason"]))

