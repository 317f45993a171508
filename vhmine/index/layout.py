"""The index's files and where they are: their names, a row's image id, writing the vector files and
manifest.json, and which indexes a folder of indexes holds.

    indexes/<name>/manifest.json   encoders (weights, preprocessing, dims), counts, checksums,
                                   skipped images with reasons, files removed since they were
                                   embedded (path, sha256, image_id, reason), vhmine version; written LAST
    indexes/<name>/images.parquet  row i: image_id, path, sha256, width, height, coco_id, categories
    indexes/<name>/clip.faiss      IndexFlatIP, row i = images.parquet row i (its rows are one float32
                                   array after a short header: index.rows reads them by row range)
    indexes/<name>/dino.faiss      IndexFlatIP, row i = images.parquet row i
    indexes/<name>/skipped.csv     path, reason for every image that could not be used
    indexes/<name>/row_digests.npz each row's digest, kept by the embed that wrote the index (or the first run
                                   that needed them), and the vector files' states it vouches for; checked
                                   against the rows where the files' states changed (index.digests)
    indexes/<name>/work/           the embed job's plan and finished shards (vhmine.embed.work)

Writes those files (`write_index`, or `write_manifest` over files a writer wrote row chunk by row chunk:
index.rows.FlatWriter); reads the folder listing and manifest.json's presence and checksum. Atomic writes
are files.py's.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from vhmine.errors import IndexCorruptError, IndexMissingError
from vhmine.files import atomic_write, atomic_write_text
from vhmine.images import sha256_file

MANIFEST = "manifest.json"
IMAGES = "images.parquet"
SKIPPED = "skipped.csv"
VECTOR_FILES = {"clip": "clip.faiss", "dino": "dino.faiss"}
FORMAT_VERSION = 1


def image_id_for(sha256: str) -> str:
    """Stable image id: content-addressed, so renames and moves keep it and exact duplicates share it."""
    return sha256[:16]


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
    folder = Path(folder)
    (folder / MANIFEST).unlink(missing_ok=True)  # until the end, the index is half-written
    atomic_write(folder / IMAGES, lambda tmp: images.to_parquet(tmp, index=False))
    atomic_write(folder / SKIPPED, lambda tmp: skipped.to_csv(tmp, index=False))
    write_faiss(folder / VECTOR_FILES["clip"], clip)
    write_faiss(folder / VECTOR_FILES["dino"], dino)
    write_manifest(folder, manifest, skipped=skipped, images=len(images))


def write_manifest(folder: Path, manifest: dict, *, skipped, images: int) -> None:
    """manifest.json over an index's finished files (their sizes and checksums): the last step of
    write_index, and of writers that write the other files themselves (row chunk by row chunk)."""
    import time

    from vhmine import __version__

    folder = Path(folder)
    files = {}
    for fname in (IMAGES, SKIPPED, *VECTOR_FILES.values()):
        p = folder / fname
        files[fname] = {"bytes": p.stat().st_size, "sha256": sha256_file(p)}
    full = {
        "format_version": FORMAT_VERSION,
        "vhmine_version": __version__,
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **manifest,
        "skipped": skipped.to_dict("records"),
        "files": files,
    }
    full.setdefault("counts", {})["images"] = int(images)
    atomic_write_text(folder / MANIFEST, json.dumps(full, indent=2, default=str))


def index_folder(root: Path, name: str) -> Path:
    return Path(root) / name


def manifest_sha256(folder: Path) -> str:
    """The sha256 of an index's manifest.json: what a run records to know the index it mined."""
    return sha256_file(Path(folder) / MANIFEST)


def is_finished(folder: Path) -> bool:
    """Whether `folder` holds a finished index (its manifest.json, written last, is there)."""
    return (Path(folder) / MANIFEST).is_file()


def embed_running(folder: Path) -> str | None:
    """Who is embedding into the index at `folder` now: "process N" (or "" when it wrote no id), or None
    when no `vhmine embed` holds its job lock (work/lock, an flock: vhmine.embed.job) or this process's own
    does (an embed reads the index it is writing). Probes the lock for a moment, shared, and creates nothing."""
    import fcntl

    try:
        f = open(Path(folder) / "work" / "lock")
    except OSError:
        return None
    with f:
        try:
            fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = f.read().strip()
            if holder == str(os.getpid()):  # this process's own embed, reading the index it holds
                return None
            return f"process {holder}" if holder.isdigit() else ""
        except OSError:
            return None
        fcntl.flock(f, fcntl.LOCK_UN)
    return None


def embedding_line(name: str, who: str) -> str:
    """What a command that reads an index says while `vhmine embed` writes it."""
    return (
        f"index {name!r} is being embedded now (`vhmine embed`{f', {who}' if who else ''} is running): wait for it "
        "to finish, then run this command again"
    )


def list_indexes(root: Path) -> list[str]:
    """Names of the collections under `root` (finished or not)."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))


def default_index_name(root: Path, name: str | None) -> str:
    """The index to use when `--index` is left out: VHMINE_INDEX, else the only one there is."""
    if name:
        return name
    env = os.environ.get("VHMINE_INDEX")
    if env:
        return env
    every = list_indexes(root)
    names = [n for n in every if is_finished(root / n)]  # an unfinished embed job is no choice
    unfinished = [n for n in every if n not in names]
    if len(names) == 1:
        return names[0]
    if not names and unfinished:
        running = [(n, w) for n in unfinished if (w := embed_running(root / n)) is not None]
        if len(running) == 1 and len(unfinished) == 1:
            raise IndexMissingError(f"no finished index under {root}/: {embedding_line(*running[0])}")
        raise IndexMissingError(
            f"no finished index under {root}/: {', '.join(unfinished)} did not finish embedding; rerun the same "
            "`vhmine embed` command to finish it (or pass --index NAME)"
        )
    if not names:
        raise IndexMissingError(
            f"no index under {root}/: build one with `vhmine embed FOLDER --name NAME` "
            "(or point --indexes / VHMINE_INDEXES at the folder that holds them)"
        )
    raise IndexMissingError(
        f"{len(names)} indexes under {root}/ ({', '.join(names)}): say which with --index NAME or set VHMINE_INDEX"
    )


def read_manifest(folder: Path) -> dict:
    """An index's manifest.json (OSError where there is none, ValueError where it is no JSON object)."""
    manifest = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    if not isinstance(manifest, dict):
        raise ValueError(f"{Path(folder) / MANIFEST} holds no JSON object")
    return manifest
