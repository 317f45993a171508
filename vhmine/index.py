"""The on-disk index of one collection: layout, atomic writes, reading and validation.

    indexes/<name>/manifest.json   encoders (weights, preprocessing, dims), counts, checksums,
                                   skipped images with reasons, files removed since they were
                                   embedded (path, sha256, image_id, reason), vhmine version; written LAST
    indexes/<name>/images.parquet  row i: image_id, path, sha256, width, height, coco_id, categories
    indexes/<name>/clip.faiss      IndexFlatIP, row i = images.parquet row i
    indexes/<name>/dino.faiss      IndexFlatIP, row i = images.parquet row i
    indexes/<name>/skipped.csv     path, reason for every image that could not be used
    indexes/<name>/work/           the embed job's plan and finished shards (see embed.py)

An index without manifest.json is half-written (a job was stopped before it finished):
`open_index` refuses it and says how to finish it. `vhmine embed` writes; `vhmine mine` reads.

Also the file-system rules every stage shares: `atomic_write` and `replace_dir` publish a file or a
folder by rename after flushing it to disk (fsync), and `check_owned` refuses to replace or write
into a folder that vhmine did not write. `locate_image` finds a file by its content (sha256) through
the indexes, for stages that recorded a path that has since moved.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import IndexCorruptError, IndexMissingError
from .images import sha256_file

MANIFEST = "manifest.json"
IMAGES = "images.parquet"
SKIPPED = "skipped.csv"
VECTOR_FILES = {"clip": "clip.faiss", "dino": "dino.faiss"}
FORMAT_VERSION = 1


def image_id_for(sha256: str) -> str:
    """Stable image id: content-addressed, so renames and moves keep it and exact duplicates share it."""
    return sha256[:16]


def fsync_path(path: Path) -> None:
    """Flush a file's (or a folder's entries') data to disk, so a crash after the rename loses nothing."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(folder: Path) -> None:
    """Every file of a folder, then every folder bottom-up, before the folder is published."""
    for dirpath, _dirnames, filenames in os.walk(folder, topdown=False):
        for name in filenames:
            fsync_path(Path(dirpath, name))
        fsync_path(Path(dirpath))


def atomic_write(path: Path, write) -> None:
    """Run `write(tmp_path)` and move the result into place, so readers never see half a file.

    The file is flushed to disk before the rename and the folder after it: once this returns, a
    crash or power loss leaves the new file, never an empty or half one under the final name."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        fsync_path(Path(tmp))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_path(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def replace_dir(tmp: Path, final: Path, *, producer: str, flag: str = "--out") -> None:
    """Swap a finished folder into place. An older folder of that name goes only once the new one is
    there, and only if `producer` wrote it (check_owned); if the swap fails, the older one is put back.
    The new folder's files are flushed to disk before the swap, its parent after it."""
    import shutil
    import uuid

    final = Path(final)
    check_owned(final, producer, flag=flag)
    _fsync_tree(Path(tmp))
    if not final.exists():
        os.rename(tmp, final)
        fsync_path(final.parent)
        return
    old = final.parent / f".{final.name}.old-{uuid.uuid4().hex[:8]}"
    os.rename(final, old)
    try:
        os.rename(tmp, final)
    except BaseException:
        os.rename(old, final)
        raise
    fsync_path(final.parent)
    shutil.rmtree(old, ignore_errors=True)


# What marks a folder as written by a stage: the file that records its producer (and its files).
_MARKS = {"vhmine mine": ("run", "run.json"), "vhmine export": ("export", "manifest.json"),
          "vhmine embed": ("index", MANIFEST)}
_SQLITE_MAGIC = b"SQLite format 3\0"


def check_owned(folder: Path, producer: str, *, flag: str = "--out", whole: bool = True) -> None:
    """Refuse to replace (`whole`) or write into `folder` unless it is absent, empty, or `producer` wrote it.

    For a whole-folder swap every file in it must be one the producer's record lists, so a file a
    user added later is never deleted with it. The error says what the folder holds and what to do.
    """
    from .errors import InputError

    folder = Path(folder)
    noun, mark = _MARKS[producer]
    if folder.name in ("", ".", ".."):
        raise InputError(f"{flag} {folder}: name the {noun}'s own folder (e.g. {flag} {noun}s/my-{noun}), not . or .. or /")
    if not folder.exists():
        return
    if not folder.is_dir():
        raise InputError(f"{flag} {folder}: a file of that name exists; give a folder path for the {noun}")
    entries = sorted(p.name for p in folder.iterdir())
    if not entries:
        return
    record = _read_record(folder / mark)
    if producer == "vhmine embed" and any((folder / "work" / f).is_file() for f in ("job.json", "lock")):
        record = record or {"producer": producer}  # an embed job that has not finished yet
    if record.get("producer") == producer:
        if not whole:
            return
        listed = set(record.get("files") or {}) | {mark}
        extra = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                       if not p.is_dir() and p.relative_to(folder).as_posix() not in listed)
        if not extra:
            return
        raise InputError(
            f"{flag} {folder}: this {noun} from `{producer}` also holds files that {producer} did not write there "
            f"({_few(extra)}); replacing it would delete them. Move them out first, or choose another {flag}")
    stores = [e for e in entries if _is_sqlite(folder / e)]
    others = [e for e in entries if e not in stores and not e.startswith(tuple(f"{st}-" for st in stores))]
    holds = _few(others)
    if stores:  # e.g. data/ with data/vhmine.db (and its -wal, -shm files)
        holds = f"the curation store ({', '.join(stores)})" + (f" and {holds}" if others else "")
    action = "replaces its folder with everything in it" if whole else "writes its files into that folder"
    article = "an" if noun[0] in "aeiou" else "a"
    raise InputError(
        f"{flag} {folder}: the folder exists and is not {article} {noun} that `{producer}` wrote (no {mark} from it); it "
        f"holds {holds}. `{producer}` {action}, so give a new or empty folder (choose another {flag}), "
        "or remove that folder yourself if you really mean to replace it")


def _read_record(path: Path) -> dict:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _is_sqlite(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_MAGIC)) == _SQLITE_MAGIC
    except OSError:
        return False


def _few(names: list[str], n: int = 5) -> str:
    shown = ", ".join(names[:n])
    return shown + (f" and {len(names) - n} more" if len(names) > n else "")


def write_faiss(path: Path, vectors) -> None:
    """Write float32 L2-normalised rows as an exact inner-product index."""
    import faiss
    import numpy as np

    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    index = faiss.IndexFlatIP(vectors.shape[1])
    if len(vectors):
        index.add(vectors)
    atomic_write(path, lambda tmp: faiss.write_index(index, str(tmp)))


def read_faiss_vectors(path: Path):
    """The stored rows of a flat index as an (n, d) float32 array (no copy through reconstruct)."""
    import faiss
    import numpy as np

    index = faiss.read_index(str(path))
    if not isinstance(index, faiss.IndexFlat):
        raise IndexCorruptError(
            f"{path}: expected a flat (exact) FAISS index, found {type(index).__name__}; this is not a file "
            "`vhmine embed` wrote: delete manifest.json next to it and run the same `vhmine embed` again"
        )
    codes = faiss.vector_to_array(index.codes)
    return codes.view(np.float32).reshape(index.ntotal, index.d)


def write_index(folder: Path, images, clip, dino, *, skipped, manifest: dict) -> None:
    """Write an index's files; manifest.json (checksums, counts, skipped list added here) goes last.

    `images` is a DataFrame whose row i matches row i of `clip` and `dino`; `manifest` carries the
    producer's fields (name, root, encoders with their dims, counts, ...).
    """
    import time

    from . import __version__

    folder = Path(folder)
    (folder / MANIFEST).unlink(missing_ok=True)  # until the end, the index is half-written
    atomic_write(folder / IMAGES, lambda tmp: images.to_parquet(tmp, index=False))
    atomic_write(folder / SKIPPED, lambda tmp: skipped.to_csv(tmp, index=False))
    write_faiss(folder / VECTOR_FILES["clip"], clip)
    write_faiss(folder / VECTOR_FILES["dino"], dino)
    files = {}
    for fname in (IMAGES, SKIPPED, *VECTOR_FILES.values()):
        p = folder / fname
        files[fname] = {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
    full = {"format_version": FORMAT_VERSION, "vhmine_version": __version__,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **manifest,
            "skipped": skipped.to_dict("records"), "files": files}
    full.setdefault("counts", {})["images"] = int(len(images))
    atomic_write_text(folder / MANIFEST, json.dumps(full, indent=2, default=str))


@dataclass
class CollectionIndex:
    name: str
    folder: Path
    manifest: dict
    images: Any  # pandas.DataFrame, row i = vector row i
    clip: Any  # (n, d_clip) float32
    dino: Any  # (n, d_dino) float32

    @property
    def root(self) -> Path:
        return Path(self.manifest["root"])

    def abs_paths(self) -> list[str]:
        root = self.root
        return [str(root / p) for p in self.images["path"]]


def index_folder(root: Path, name: str) -> Path:
    return Path(root) / name


def open_index(root: Path, name: str, *, load_vectors: bool = True) -> CollectionIndex:
    """Open and validate a finished index; every failure says what is wrong and what to run."""
    import pandas as pd

    folder = index_folder(root, name)
    if not folder.is_dir():
        from .config import list_indexes

        have = list_indexes(Path(root))
        listing = f" (there are: {', '.join(have)})" if have else ""
        raise IndexMissingError(
            f"no index named {name!r} under {root}/{listing}: build it with `vhmine embed FOLDER --name {name}`"
        )
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        raise IndexCorruptError(
            f"index {name!r} at {folder} is half-written (no {MANIFEST}): its embed job did not finish. "
            "Run the same `vhmine embed` command again to finish it"
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise IndexCorruptError(f"{manifest_path} is unreadable ({err}); rebuild with `vhmine embed`") from err
    if manifest.get("format_version", 0) > FORMAT_VERSION:
        raise IndexCorruptError(f"index {name!r} was written by a newer vhmine ({manifest.get('vhmine_version')}); upgrade vhmine")
    n = manifest.get("counts", {}).get("images")
    for fname, meta in manifest.get("files", {}).items():
        p = folder / fname
        if not p.is_file():
            raise IndexCorruptError(f"index {name!r}: {p} is missing; rerun `vhmine embed` to rebuild it")
        if p.stat().st_size != meta["bytes"]:
            raise IndexCorruptError(
                f"index {name!r}: {p} has {p.stat().st_size} bytes, the manifest says {meta['bytes']} "
                "(truncated or changed); rerun `vhmine embed` to rebuild it"
            )
    try:
        images = pd.read_parquet(folder / IMAGES)
    except Exception as err:  # pyarrow raises several kinds
        raise IndexCorruptError(f"index {name!r}: {folder / IMAGES} is unreadable ({err}); rerun `vhmine embed`") from err
    if len(images) != n:
        raise IndexCorruptError(f"index {name!r}: {IMAGES} has {len(images)} rows, the manifest says {n}")
    clip = dino = None
    if load_vectors:
        vecs = {}
        for kind, fname in VECTOR_FILES.items():
            try:
                vecs[kind] = read_faiss_vectors(folder / fname)
            except IndexCorruptError:
                raise
            except Exception as err:  # faiss raises RuntimeError on a bad file
                raise IndexCorruptError(f"index {name!r}: {folder / fname} is unreadable ({err}); rerun `vhmine embed`") from err
            want_dim = manifest["encoders"][kind]["dim"]
            if vecs[kind].shape != (n, want_dim):
                raise IndexCorruptError(
                    f"index {name!r}: {fname} holds {vecs[kind].shape[0]} x {vecs[kind].shape[1]} vectors, "
                    f"expected {n} x {want_dim}"
                )
        clip, dino = vecs["clip"], vecs["dino"]
    return CollectionIndex(name, folder, manifest, images, clip, dino)


_PATHS_BY_SHA: dict[tuple, dict] = {}  # (folder, manifest mtime and size) -> sha256 -> paths


def image_paths_by_sha(folder: Path) -> dict[str, list[Path]]:
    """sha256 -> absolute paths of the files a finished index holds with that content (the indexed
    path first, then its exact duplicates). Empty for a folder that is not a readable index."""
    folder = Path(folder)
    try:
        st = (folder / MANIFEST).stat()
    except OSError:
        return {}
    key = (str(folder.resolve()), st.st_mtime_ns, st.st_size)
    if key not in _PATHS_BY_SHA:
        try:
            idx = open_index(folder.parent, folder.name, load_vectors=False)
        except (IndexCorruptError, IndexMissingError):
            return {}
        dups = idx.images["duplicate_paths"] if "duplicate_paths" in idx.images else [[]] * len(idx.images)
        _PATHS_BY_SHA[key] = {sha: [idx.root / p, *(idx.root / d for d in more)]
                              for sha, p, more in zip(idx.images["sha256"], idx.images["path"], dups)}
    return _PATHS_BY_SHA[key]


def locate_image(sha256: str, recorded: Path | None, index_folders) -> Path | None:
    """A file whose bytes hash to `sha256`: `recorded` while it still does, else one of the paths the
    indexes list for it; None if none does. `index_folders()` gives the indexes' folders; it is
    called only when the recorded file does not do.

    A file whose content changed is never taken for the image it was: every candidate is hashed."""
    tried: set[Path] = set()

    def matches(p: Path) -> bool:
        if p in tried:
            return False
        tried.add(p)
        return p.is_file() and sha256_file(p) == sha256

    if recorded is not None and matches(Path(recorded)):
        return Path(recorded)
    for folder in index_folders():
        for p in image_paths_by_sha(folder).get(sha256, []):
            if matches(p):
                return p
    return None
