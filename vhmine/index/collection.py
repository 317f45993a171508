"""One finished index opened and checked, and images found through indexes by their content.

Reads `indexes/<name>/` (its files: index.layout): `open_index` validates manifest.json against the files
(sizes; rows and dims of the vectors, index.rows) and loads what is asked for; an index without
manifest.json is half-written (a job was stopped before it finished: its work/ folder, or the index files,
are there) and is refused with how to finish it; a folder with neither never was an index, and is named as
such. `index_rows` gives the row-range reader of a finished index, local or at an --index-url checked to
be the same index. Writes nothing.

`locate_image` finds an image by its content (sha256) through the indexes, for stages that recorded a
path that has since moved; an image is a file, or a member of a WebDataset tar (`.../00000.tar/KEY.jpg`),
local or behind an fsspec URL (images.read_image_bytes opens both).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vhmine.errors import IndexCorruptError, IndexMissingError
from vhmine.images import image_sha256, join_location, local_path, remote_url, sha256_file
from vhmine.index.layout import (
    FORMAT_VERSION,
    IMAGES,
    MANIFEST,
    SKIPPED,
    VECTOR_FILES,
    embed_running,
    embedding_line,
    index_folder,
    list_indexes,
)

if TYPE_CHECKING:  # annotations only: rows imports numpy
    from vhmine.index.rows import IndexRows


@dataclass
class CollectionIndex:
    name: str
    folder: Path
    manifest: dict
    images: Any  # pandas.DataFrame, row i = vector row i
    clip: Any  # (n, d_clip) float32
    dino: Any  # (n, d_dino) float32
    vector_states: Any = None  # index.digests.FileStates of the vector files, taken before clip and dino were read

    @property
    def root(self) -> Path:
        """The folder the `path`s are relative to (a URL's `//` folds into `/` in a Path: use `location`)."""
        return Path(local_path(self._root_text()))

    def _root_text(self) -> str:
        # one WebDataset .tar given to `vhmine embed`: the paths are `00000.tar/MEMBER`, relative to its folder
        root = str(self.manifest["root"])
        if self.manifest.get("source", {}).get("kind") == "webdataset" and root.endswith(".tar"):
            root = root.rsplit("/", 1)[0]
        return root

    @property
    def skipped_file(self) -> Path:
        """skipped.csv: the images that could not be used, with why."""
        return self.folder / SKIPPED

    @property
    def images_file(self) -> Path:
        """images.parquet: what index.rows.image_rows reads the columns of chosen rows from."""
        return self.folder / IMAGES

    def location(self, rel: str) -> str:
        """Where the image at `rel` (a `path` of images.parquet) is: a local path, or an fsspec URL."""
        return join_location(self._root_text(), rel)

    def locations(self, rels):
        """`location` of each of `rels` (strs: a sequence, numpy or pyarrow array), as an object array, joined
        in pyarrow (join_locations): what a run writes for each of its pairs' images."""
        return join_locations(self._root_text(), rels)

    def abs_paths(self) -> list[str]:
        return list(self.locations(self.images["path"]))


# a path that Path would change when joined to a folder (absolute, empty, a `.` part, a doubled or trailing
# slash): join_locations joins each of those as join_location does, one by one
_UNCLEAN = r"^/|^$|//|/$|(^|/)\.(/|$)"


def join_locations(root: str, rels):
    """join_location(root, rel) of each of `rels`, the same strs, as an object array: the root's prefix worked
    out once (join_location asks the file system whether the root exists, and builds a Path, for each) and
    joined to every rel in pyarrow; only a rel that Path would change is joined one by one."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(rels, (pa.Array, pa.ChunkedArray)):  # a pandas str array hands over its arrow data
        rels = pa.array(rels) if hasattr(rels, "__arrow_array__") else pa.array(np.asarray(rels, object), pa.string())
    url = remote_url(root)
    # a clean rel's parts follow the root's: Path(root) / rel is the root's own text for "x" with rel for x
    prefix = f"{url.rstrip('/')}/" if url else str(Path(local_path(root)) / "x")[:-1]
    joined = pc.binary_join_element_wise(pa.scalar(prefix, rels.type), rels, pa.scalar("", rels.type))
    unclean = _UNCLEAN if os.sep == "/" else "^"  # (another separator: Path writes its own; each rel alone)
    odd = pc.fill_null(pc.match_substring_regex(rels, unclean), False) if url is None else None
    if odd is not None and pc.any(odd).as_py():
        fixed = [join_location(root, r) for r in rels.filter(odd).to_pylist()]
        joined = pc.replace_with_mask(joined, odd, pa.array(fixed, rels.type))
    return joined.to_numpy(zero_copy_only=False)


def open_index(root: Path, name: str, *, load_vectors: bool = True, load_images: bool = True) -> CollectionIndex:
    """Open and validate a finished index; every failure says what is wrong and what to run (while a
    `vhmine embed` writes the index: to wait for it, not to run it again).

    load_vectors=False: the vector files' headers are checked (rows and dims, index.rows) but their rows
    are not read; load_images=False: neither is images.parquet's table (only its row count), so `images`
    is None. `vhmine mine --engine ray` opens an index of any size this way."""
    try:
        return _open_index(root, name, load_vectors=load_vectors, load_images=load_images)
    except IndexCorruptError:
        who = embed_running(index_folder(root, name))
        if who is None:
            raise
        raise IndexCorruptError(embedding_line(name, who)) from None


def _open_index(root: Path, name: str, *, load_vectors: bool, load_images: bool) -> CollectionIndex:
    import pandas as pd

    folder = index_folder(root, name)
    if not folder.is_dir():
        have = list_indexes(Path(root))
        listing = f" (there are: {', '.join(have)})" if have else ""
        raise IndexMissingError(
            f"no index named {name!r} under {root}/{listing}: build it with `vhmine embed FOLDER --name {name}`"
        )
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        if not any((folder / f).exists() for f in ("work", IMAGES, *VECTOR_FILES.values())):
            have = [n for n in list_indexes(Path(root)) if (Path(root) / n / MANIFEST).is_file()]
            listing = f" (there are: {', '.join(have)})" if have else ""
            raise IndexMissingError(
                f"{folder} is not an index: it has no {MANIFEST}, nor the work/ folder a stopped `vhmine embed` "
                f"leaves. --index names an index under {root}/{listing}; build one with "
                "`vhmine embed IMAGES --name NAME`"
            )
        raise IndexCorruptError(  # a stopped embed job left its work/ folder (or the index files, not the manifest)
            f"index {name!r} at {folder} is half-written (no {MANIFEST}): its embed job did not finish. "
            "Run the same `vhmine embed` command again to finish it"
        )
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise IndexCorruptError(f"{manifest_path} is unreadable ({err}); rebuild with `vhmine embed`") from err
    if manifest.get("format_version", 0) > FORMAT_VERSION:
        raise IndexCorruptError(
            f"index {name!r} was written by a newer vhmine ({manifest.get('vhmine_version')}); upgrade vhmine"
        )
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
    images = None
    try:
        if load_images:
            images = pd.read_parquet(folder / IMAGES)
            rows = len(images)
        else:
            import pyarrow.parquet as pq

            rows = pq.ParquetFile(folder / IMAGES).metadata.num_rows
    except Exception as err:  # pyarrow raises several kinds
        raise IndexCorruptError(
            f"index {name!r}: {folder / IMAGES} is unreadable ({err}); rerun `vhmine embed`"
        ) from err
    if rows != n:
        raise IndexCorruptError(f"index {name!r}: {IMAGES} has {rows} rows, the manifest says {n}")
    clip = dino = states = None
    if not load_vectors:
        from vhmine.index.rows import open_vectors

        for kind, fname in VECTOR_FILES.items():
            vf = open_vectors(folder / fname)
            want_dim = ((manifest.get("encoders") or {}).get(kind) or {}).get("dim", vf.dim)
            if (vf.rows, vf.dim) != (n, want_dim):
                raise IndexCorruptError(
                    f"index {name!r}: {fname} holds {vf.rows} x {vf.dim} vectors, expected {n} x {want_dim}"
                )
    else:
        from vhmine.index.digests import file_states
        from vhmine.index.rows import open_vectors

        states = file_states(folder)  # (before the rows are read: the kept digests vouch for these states' bytes)
        vecs = {}
        for kind, fname in VECTOR_FILES.items():
            # the flat file's rows read straight into numpy (index.rows): no faiss import for a small run
            try:
                vf = open_vectors(folder / fname)
                vecs[kind] = vf.read(0, vf.rows)
            except IndexCorruptError:
                raise
            except (OSError, ValueError) as err:
                raise IndexCorruptError(
                    f"index {name!r}: {folder / fname} is unreadable ({err}); rerun `vhmine embed`"
                ) from err
            want_dim = manifest["encoders"][kind]["dim"]
            if vecs[kind].shape != (n, want_dim):
                raise IndexCorruptError(
                    f"index {name!r}: {fname} holds {vecs[kind].shape[0]} x {vecs[kind].shape[1]} vectors, "
                    f"expected {n} x {want_dim}"
                )
        clip, dino = vecs["clip"], vecs["dino"]
    return CollectionIndex(name, folder, manifest, images, clip, dino, states)


def open_named_index(
    where: str | os.PathLike, indexes: str | os.PathLike | None = None, *, load: bool = True
) -> CollectionIndex:
    """open_index of `where`: a folder holding an index (its manifest.json), else a name under `indexes`
    (config.indexes_root). load: the vectors and the image table too."""
    from vhmine.config import indexes_root

    p = Path(where).expanduser()
    if (p / MANIFEST).is_file():
        return open_index(p.resolve().parent, p.resolve().name, load_vectors=load, load_images=load)
    return open_index(indexes_root(indexes), str(where), load_vectors=load, load_images=load)


def index_rows(folder: str | os.PathLike, *, url: str | None = None, ids: bool = True) -> IndexRows:
    """The IndexRows of a finished index folder; with `url`, the same files as the workers read them
    there (an fsspec URL or a path of the index folder), checked to be the same index (_same_index) before
    anything runs."""
    from vhmine.index.rows import IndexRows, id_width, open_vectors

    folder = Path(folder).resolve()
    local = {k: open_vectors(folder / f) for k, f in VECTOR_FILES.items()}
    if local["clip"].rows != local["dino"].rows:
        raise IndexCorruptError(
            f"{folder}: clip has {local['clip'].rows} rows, dino {local['dino'].rows}; "
            "rerun `vhmine embed` to rebuild it"
        )
    base = url.rstrip("/") if url else str(folder)
    files = {}
    for k, f in VECTOR_FILES.items():
        where = f"{base}/{f}"
        vf = open_vectors(where) if url else local[k]
        if (vf.offset, vf.rows, vf.dim) != (local[k].offset, local[k].rows, local[k].dim):
            raise IndexCorruptError(
                f"{where} holds {vf.rows} x {vf.dim} rows, the index at {folder} "
                f"{local[k].rows} x {local[k].dim}: --index-url names another index"
            )
        files[k] = vf
    if url:
        _same_index(folder, base, local, files, ids)
    images = f"{base}/{IMAGES}" if ids else None
    width = id_width(str(folder / IMAGES)) if ids else 16
    return IndexRows(files["clip"], files["dino"], images, width, sha256_file(folder / MANIFEST))


def _same_index(folder: Path, base: str, local: dict, remote: dict, ids: bool) -> None:
    """IndexCorruptError, in one line, unless the index at `base` (an --index-url) is the one in `folder`: its
    manifest.json lists the same files with the same checksums, the files the workers read have the sizes
    it lists, and the first and last row of each vector file are the same bytes. Reads the URL's manifest,
    two rows a vector file and the files' sizes (a whole file is never read: hashing it would read the index)."""
    import numpy as np

    from vhmine.index.rows import file_size, read_bytes

    hint = (
        f"--index-url {base} must hold a copy of the index at {folder} (every file, manifest.json included); "
        "copy the folder there again, or point --index-url at its copy"
    )
    mine = json.loads((folder / MANIFEST).read_text(encoding="utf-8")).get("files") or {}
    try:
        theirs = json.loads(read_bytes(f"{base}/{MANIFEST}", 0, file_size(f"{base}/{MANIFEST}")))
    except (OSError, ValueError) as err:  # (json's error is a ValueError)
        why = "absent" if isinstance(err, FileNotFoundError) else f"unreadable: {err.strerror or err}"
        raise IndexCorruptError(f"{base}/{MANIFEST} is {why}; {hint}") from None
    listed = (theirs.get("files") if isinstance(theirs, dict) else None) or {}
    differ = sorted(f for f in set(mine) | set(listed) if mine.get(f) != listed.get(f))
    if differ:
        raise IndexCorruptError(
            f"{base} holds another index: its {MANIFEST} gives other checksums for {', '.join(differ)}; {hint}"
        )
    for f in [*VECTOR_FILES.values(), *([IMAGES] if ids else [])]:
        size, want = file_size(f"{base}/{f}"), (mine.get(f) or {}).get("bytes")
        if want is not None and size != want:
            raise IndexCorruptError(
                f"{base}/{f} has {size:,} bytes, the manifest says {want:,}: it was changed or cut short; {hint}"
            )
    for k, vf in remote.items():
        ends = np.array([0, vf.rows - 1]) if vf.rows else np.zeros(0, np.int64)
        if not np.array_equal(vf.take(ends).view(np.uint32), local[k].take(ends).view(np.uint32)):
            raise IndexCorruptError(
                f"{vf.location} holds other vectors than {folder / VECTOR_FILES[k]} (its first or "
                f"last row differs); {hint}"
            )


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
        _PATHS_BY_SHA[key] = {
            sha: [_as_found(idx.location(p)), *(_as_found(idx.location(d)) for d in more)]
            for sha, p, more in zip(idx.images["sha256"], idx.images["path"], dups)
        }
    return _PATHS_BY_SHA[key]


def _as_found(location: str) -> Path | str:
    """A local location as a Path; a URL stays a string (a Path would fold its `//`)."""
    return location if remote_url(location) else Path(location)


def locate_image(sha256: str, recorded: Path | str | None, index_folders) -> Path | str | None:
    """An image whose bytes hash to `sha256`: `recorded` while it still does, else one of the places the
    indexes list for it; None if none does. A place is a file or a tar member (a Path), or an fsspec URL (a
    str). `index_folders()` gives the indexes' folders; it is called only when the recorded one does not do.

    An image whose content changed is never taken for the image it was: every candidate is hashed."""
    tried: set[str] = set()

    def matches(p) -> bool:
        if str(p) in tried:
            return False
        tried.add(str(p))
        return image_sha256(p) == sha256

    if recorded is not None and matches(recorded):
        return _as_found(remote_url(recorded) or local_path(recorded))
    for folder in index_folders():
        for p in image_paths_by_sha(folder).get(sha256, []):
            if matches(p):
                return p
    return None
