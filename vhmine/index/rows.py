"""An index's vectors and image ids read by row range, without loading the index: what each task of
`vhmine mine --engine ray` reads, from a shared filesystem or an fsspec URL.

Reads the vector files of `indexes/<name>/` (clip.faiss and dino.faiss are faiss flat indexes, whose rows
are one float32 array at a fixed byte offset after a short header; .npy files holding such rows read the
same way) and the `image_id` column of images.parquet, by row group. A location is a local path on a
shared filesystem (positioned reads of just the rows asked for; a memory map would count the cached
pages around every touched row in the reader's resident set) or an fsspec URL (s3://, gs://, https://,
file://, ...: read by byte range, one request per run of near rows). `FlatWriter` writes a faiss flat file row chunk by
row chunk, so an index of any
size is written without holding its vectors; faiss reads it as it reads its own. Writes nothing else.
(index.index_rows gives the IndexRows of an index folder.)

No migration is needed for existing indexes: faiss's flat format has always stored its rows this way,
so clip.faiss and dino.faiss are read in place (the header is checked on every open, and a file that is
not a flat index, or whose size disagrees with its header, is named).
"""

from __future__ import annotations

import functools
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vhmine.errors import IndexCorruptError

# faiss's flat index file: fourcc, d (int32), ntotal (int64), two dummy int64s, is_trained (uint8),
# metric_type (int32), then the codes as a uint64 count of floats and the rows themselves.
_FLAT_HEADER = struct.Struct("<4siqqqBi")
_FLAT_FOURCCS = {b"IxFI": 0, b"IxF2": 1}  # inner product, L2
_SPAN_GAP = 256  # rows: wanted rows closer than this are read in one range request


def is_url(location) -> bool:
    """Whether `location` is read through fsspec: any URL, file:// included (its byte ranges are fsspec's)."""
    text = str(location)
    return "://" in text and not os.path.exists(text)


def _fs(location: str):
    import fsspec

    return fsspec.core.url_to_fs(location)


def open_location(location: str):
    """A local file or an fsspec URL opened for binary reading (a seekable file object)."""
    if is_url(location):
        fs, path = _fs(location)
        return fs.open(path, "rb")
    return open(location, "rb")


def read_bytes(location: str, start: int, stop: int) -> bytes:
    """Bytes [start, stop) of a local file or an fsspec URL."""
    if is_url(location):
        fs, path = _fs(location)
        return fs.cat_file(path, start=start, end=stop)
    with open(location, "rb") as f:
        f.seek(start)
        return f.read(stop - start)


def file_size(location: str) -> int:
    if is_url(location):
        fs, path = _fs(location)
        return int(fs.size(path))
    return os.path.getsize(location)


@dataclass(frozen=True)
class VectorFile:
    """Rows of float32 vectors stored contiguously at `offset` in the file at `location`."""

    location: str
    offset: int
    rows: int
    dim: int

    @property
    def row_bytes(self) -> int:
        return 4 * self.dim

    def read(self, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) as a fresh (stop - start, dim) float32 array."""
        start, stop = max(0, start), min(self.rows, stop)
        if stop <= start:
            return np.zeros((0, self.dim), np.float32)
        lo, hi = self.offset + start * self.row_bytes, self.offset + stop * self.row_bytes
        if is_url(self.location):
            return np.frombuffer(read_bytes(self.location, lo, hi), np.float32).reshape(stop - start, self.dim).copy()
        # positioned reads, not a memory map: a map's page faults also map the neighbouring cached pages
        # into the process (fault-around), so its resident set would grow with the file, not the rows read
        with open(self.location, "rb") as f:
            f.seek(lo)
            return np.fromfile(f, np.float32, (stop - start) * self.dim).reshape(stop - start, self.dim)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """The given rows (any order, repeats allowed) as a (len(rows), dim) float32 array: one read per
        run of near rows (one range request, for a URL)."""
        rows = np.asarray(rows, np.int64)
        if not len(rows):
            return np.zeros((0, self.dim), np.float32)
        if rows.min() < 0 or rows.max() >= self.rows:
            raise IndexError(f"row {int(rows.max())} of {self.location}: it has {self.rows} rows")
        uniq, back = np.unique(rows, return_inverse=True)
        out = np.empty((len(uniq), self.dim), np.float32)
        gap = _SPAN_GAP if is_url(self.location) else 8
        cuts = np.flatnonzero(np.diff(uniq) > gap) + 1
        for part in np.split(np.arange(len(uniq)), cuts):
            lo, hi = int(uniq[part[0]]), int(uniq[part[-1]]) + 1
            out[part] = self.read(lo, hi)[uniq[part] - lo]
        return out[back]


def open_vectors(location: str | os.PathLike) -> VectorFile:
    """The layout of a faiss flat index file (or a 2-D float32 .npy file) from its header; raises
    IndexCorruptError naming the file when it is neither, or when its size disagrees with its header."""
    location = str(location)
    try:
        size = file_size(location)
        head = read_bytes(location, 0, 4096)
    except (OSError, ValueError) as err:
        raise IndexCorruptError(f"cannot read {location}: {err}") from err
    if head[:6] == b"\x93NUMPY":
        offset, rows, dim = _npy_layout(location, head)
    elif head[:4] in _FLAT_FOURCCS and len(head) >= _FLAT_HEADER.size + 8:
        _, dim, rows, _, _, _, metric = _FLAT_HEADER.unpack_from(head)
        offset = _FLAT_HEADER.size + (4 if metric > 1 else 0)  # metrics past L2 store a float argument
        (count,) = struct.unpack_from("<Q", head, offset)
        offset += 8
        if count != rows * dim:
            raise IndexCorruptError(f"{location}: its header says {rows} x {dim} rows but holds {count} floats")
    else:
        raise IndexCorruptError(
            f"{location} is not a flat faiss index (it starts {head[:4]!r}): vhmine reads only the exact "
            "indexes `vhmine embed` writes; rebuild it with `vhmine embed`"
        )
    if size != offset + 4 * rows * dim:
        raise IndexCorruptError(
            f"{location} has {size} bytes, but its header says {rows} x {dim} float32 rows after {offset} bytes "
            f"({offset + 4 * rows * dim}): it is truncated or changed; rerun `vhmine embed` to rebuild it"
        )
    return VectorFile(location, offset, rows, dim)


def _npy_layout(location: str, head: bytes) -> tuple[int, int, int]:
    import io

    f = io.BytesIO(head)
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(f)
    if dtype != np.dtype("<f4") or fortran or len(shape) != 2:
        raise IndexCorruptError(f"{location}: expected a C-order 2-D float32 array, found {dtype} {shape}")
    return f.tell(), int(shape[0]), int(shape[1])


class FlatWriter:
    """Write a faiss IndexFlatIP file from row chunks: `add(rows)` as often as needed, then `close()`.
    The header's counts are written last, into a temporary file renamed into place (files.atomic_write
    rules), so a stopped writer leaves no file under the final name."""

    def __init__(self, path: str | os.PathLike, dim: int):
        import tempfile

        self.path, self.dim, self.rows = Path(path), int(dim), 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        self.tmp, self.f = Path(tmp), os.fdopen(fd, "wb")
        self.f.write(b"\0" * (_FLAT_HEADER.size + 8))  # filled in by close()

    def add(self, rows: np.ndarray) -> None:
        rows = np.ascontiguousarray(rows, dtype="<f4")
        if rows.ndim != 2 or rows.shape[1] != self.dim:
            raise ValueError(f"rows of shape {rows.shape}: this file holds {self.dim}-d rows")
        self.f.write(rows.tobytes())
        self.rows += len(rows)

    def close(self) -> None:
        from vhmine.files import fsync_path

        try:
            self.f.seek(0)
            self.f.write(_FLAT_HEADER.pack(b"IxFI", self.dim, self.rows, 1 << 20, 1 << 20, 1, 0))
            self.f.write(struct.pack("<Q", self.rows * self.dim))
            self.f.close()
            fsync_path(self.tmp)
            os.replace(self.tmp, self.path)
            fsync_path(self.path.parent)
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        self.f.close()
        self.tmp.unlink(missing_ok=True)


@functools.lru_cache(maxsize=8)
def _parquet(location: str, version: str = ""):
    """(ParquetFile, first row of each row group); cached per process (a Ray worker reads many tiles, and
    lives on for later jobs: `version` names the index's content, so a rewritten index is read again)."""
    import pyarrow.parquet as pq

    if is_url(location):
        fs, path = _fs(location)
        pf = pq.ParquetFile(fs.open(path, "rb"))
    else:
        pf = pq.ParquetFile(location)
    sizes = [pf.metadata.row_group(g).num_rows for g in range(pf.metadata.num_row_groups)]
    return pf, np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])


@functools.lru_cache(maxsize=2)
def _group_ids(location: str, group: int, width: int, version: str = "") -> np.ndarray:
    pf, _ = _parquet(location, version)
    col = pf.read_row_group(group, columns=["image_id"]).column(0)
    return np.asarray(col.to_pylist(), dtype=f"S{width}")


def id_width(location: str, columns: tuple[str, ...] = ("image_id",)) -> int:
    """The longest image id in images.parquet (or in the given id columns of another parquet file of ids: a
    run's rows.parquet), in UTF-8 bytes, at least 1: one pass over the columns, a batch at a time."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    width = 1
    with open_location(str(location)) as f:
        for batch in pq.ParquetFile(f).iter_batches(batch_size=65_536, columns=list(columns)):
            for col in batch.columns:
                if len(col):
                    width = max(width, int(pc.max(pc.binary_length(col.cast("binary"))).as_py()))
    return width


def read_ids(location: str, start: int, stop: int, width: int, version: str = "") -> np.ndarray:
    """image_id of rows [start, stop) of images.parquet as fixed-width UTF-8 bytes (S{width}): ordered
    as the strings are, since UTF-8 keeps code point order and the padding is NUL."""
    _, starts = _parquet(location, version)
    out = []
    for g in range(int(np.searchsorted(starts, start, "right")) - 1, len(starts) - 1):
        if starts[g] >= stop:
            break
        ids = _group_ids(location, g, width, version)
        out.append(ids[max(0, start - starts[g]) : stop - starts[g]])
    return np.concatenate(out) if out else np.zeros(0, f"S{width}")


@dataclass(frozen=True)
class IndexRows:
    """Where a task reads an index: its two vector files and (for ranked runs) images.parquet's ids."""

    clip: VectorFile
    dino: VectorFile
    images: str | None = None  # images.parquet's location; None: rows have no ids (an in-memory job)
    id_width: int = 16
    version: str = ""  # names the content (the manifest's sha256): what workers' caches are keyed on

    @property
    def n(self) -> int:
        return self.clip.rows

    def ids(self, start: int, stop: int) -> np.ndarray:
        return read_ids(self.images, start, stop, self.id_width, self.version)

    def probe(self) -> str:
        """Read a row at each end of both files and the parquet footer: raises what a reader would."""
        for vf in (self.clip, self.dino):
            got = open_vectors(vf.location)
            if (got.offset, got.rows, got.dim) != (vf.offset, vf.rows, vf.dim):
                raise IndexCorruptError(
                    f"{vf.location} holds {got.rows} x {got.dim} rows, the driver's copy "
                    f"{vf.rows} x {vf.dim}: the workers see another index"
                )
            vf.take(np.array([0, vf.rows - 1]))
        if self.images is not None:
            _, starts = _parquet(self.images, self.version)
            if starts[-1] != self.n:
                raise IndexCorruptError(f"{self.images} has {starts[-1]} rows, the vectors {self.n}")
        return "ok"


def image_rows(images_parquet: str | os.PathLike, rows: np.ndarray, columns: list[str]):
    """`columns` (those the table has; coco_id always, null where absent) of the given sorted unique rows of an
    index's images.parquet (a DataFrame, one row each), read batch by batch so only those rows are kept."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(images_parquet, buffer_size=1 << 20, pre_buffer=False)  # streamed, not a row group at once
    names = [c for c in columns if c in pf.schema_arrow.names]
    parts, at = [], 0
    for batch in pf.iter_batches(batch_size=65_536, columns=names):
        lo, hi = np.searchsorted(rows, [at, at + batch.num_rows])
        if hi > lo:
            parts.append(batch.take(pa.array(rows[lo:hi] - at)))
        at += batch.num_rows
    table = pa.Table.from_batches(parts, schema=parts[0].schema if parts else pf.schema_arrow.remove_metadata())
    return image_frame(table, pf.schema_arrow.metadata)


def image_frame(table, metadata):
    """image_rows' DataFrame of an arrow table of images.parquet's columns (metadata: the file's schema
    metadata, so pandas types the columns as it types the file's)."""
    frame = table.replace_schema_metadata(metadata).to_pandas()
    if "coco_id" not in frame:
        import pandas as pd

        frame["coco_id"] = pd.array([None] * len(frame), dtype="Int64")
    return frame


def image_ranges(images_parquet: str | os.PathLike, columns: list[str], size: int):
    """(the file's schema metadata, and an iterator of `columns` (those the table has) of images.parquet's rows
    [r * size, (r + 1) * size) as arrow tables, r = 0, 1, ...): one pass over the file, a range at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(images_parquet, buffer_size=1 << 20, pre_buffer=False)
    names = [c for c in columns if c in pf.schema_arrow.names]
    batches = pf.iter_batches(batch_size=65_536, columns=names)
    return pf.schema_arrow.metadata, regrouped(batches, size, pa.Table.from_batches)


def regrouped(parts, size: int, concat):
    """The rows of `parts` (sliceable, in order) again, as pieces of exactly `size` rows (the last shorter)."""
    held, count = [], 0
    for p in parts:
        while len(p):
            take = min(len(p), size - count)
            held.append(p[:take])
            count, p = count + take, p[take:]
            if count == size:
                yield concat(held)
                held, count = [], 0
    if count:
        yield concat(held)
