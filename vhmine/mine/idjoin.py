"""Joins by image id streamed from disk, so that a Ray driver's memory does not grow with the collection: the
machinery (ids as fixed-width UTF-8 bytes, a hash of them, files of records by bucket: a grace hash join) and
the images in both indexes of `--against` (Across). mine.growjoin joins a grown index's rows with the earlier
run's through it; mine.pairwriter files the pairs table's rows by image row range with its Buckets.

Each side is read a batch at a time (a parquet file) and written, by a hash of the id's bytes (or a row range),
into one of `count` files of fixed-width records under a scratch folder; then each bucket is joined alone, in
memory. A bucket holds about BUCKET_ROWS rows of either side whatever N, so the driver holds one bucket (and
its sort), never a side. Ids are compared as their UTF-8 bytes, padded with NUL to one width (the widest id of
both sides), as vhmine.index.rows.read_ids gives them: exact, with no hash trusted for equality.
Writes only under the scratch folder it is given, which the caller removes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

BUCKET_ROWS = 1 << 18  # rows of a side in one bucket: about 16 MiB of ids and numbers at 48-byte ids
BATCH = 1 << 16  # rows read from a parquet file at a time
FLUSH_ROWS = 1 << 18  # records a Buckets holds before it appends them to their files
_PRIME = np.uint64(0x100000001B3)


def buckets_for(*sizes: int) -> int:
    return max(1, -(-max(sizes, default=0) // BUCKET_ROWS))


def id_hash(ids: np.ndarray) -> np.ndarray:
    """A uint64 hash of each fixed-width id (S{w}); NUL padding adds nothing, so an id hashes alike at any
    width. Only spreads ids over buckets: equality is always decided on the bytes."""
    n, w = len(ids), ids.dtype.itemsize
    mat = np.ascontiguousarray(ids).view(np.uint8).reshape(n, w) if n else np.zeros((0, w), np.uint8)
    h, mul = np.zeros(n, np.uint64), np.uint64(1)
    with np.errstate(over="ignore"):
        for k in range(w):
            h += mat[:, k].astype(np.uint64) * mul
            mul *= _PRIME
        # splitmix64's finaliser: every bit of h reaches the low bits the bucket is taken from
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def fixed_ids(col, width: int) -> np.ndarray:
    """An arrow string (or binary) array of ids as S{width} UTF-8 bytes, without a Python object per id."""
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        col = pa.concat_arrays(col.chunks) if col.num_chunks else pa.array([], pa.string())
    col = col.cast(pa.large_binary())
    n = len(col)
    out = np.zeros((n, width), np.uint8)
    if n:
        offsets = np.frombuffer(col.buffers()[1], np.int64)[col.offset : col.offset + n + 1]
        data = np.frombuffer(col.buffers()[2], np.uint8) if col.buffers()[2] is not None else np.zeros(0, np.uint8)
        lengths = np.diff(offsets)
        if lengths.max(initial=0) > width:
            raise ValueError(f"an image id of {int(lengths.max())} bytes, wider than {width}")
        row = np.repeat(np.arange(n), lengths)
        pos = np.arange(int(lengths.sum())) - np.repeat(offsets[:-1] - offsets[0], lengths)
        out[row, pos] = data[offsets[0] : offsets[-1]]
    return out.view(f"S{width}").reshape(n)


class Buckets:
    """`count` files of records of one dtype, appended by bucket number (their ids' hash mod count). Records
    are held until FLUSH_ROWS of them are, then each bucket's appended to its file (opened for that write
    alone: a side of LAION-400M has 1,541 buckets, more than a process may hold open)."""

    def __init__(self, folder: Path, name: str, dtype: np.dtype, count: int):
        self.folder, self.name, self.dtype, self.count = Path(folder), name, np.dtype(dtype), count
        self.folder.mkdir(parents=True, exist_ok=True)
        self._held: list[tuple[np.ndarray, np.ndarray]] = []
        self._rows = 0

    def path(self, p: int) -> Path:
        return self.folder / f"{self.name}-{p:06d}.bin"

    def add(self, records: np.ndarray, keys: np.ndarray) -> None:
        """Each record into the file of keys % count (keys: uint64 hashes, or row numbers // range)."""
        where = (keys % np.uint64(self.count)).astype(np.int64) if self.count > 1 else np.zeros(len(keys), np.int64)
        self._held.append((records, where))
        self._rows += len(records)
        if self._rows >= FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self._held:
            return
        records = np.concatenate([r for r, _ in self._held])
        where = np.concatenate([w for _, w in self._held])
        self._held, self._rows = [], 0
        order = np.argsort(where, kind="stable")  # (a bucket's records keep the order they came in)
        records, where = records[order], where[order]
        for p in np.unique(where):
            lo, hi = np.searchsorted(where, [p, p + 1])
            with open(self.path(int(p)), "ab") as f:
                f.write(records[lo:hi].tobytes())

    def close(self) -> Buckets:
        self._flush()
        return self

    def read(self, p: int) -> np.ndarray:
        path = self.path(p)
        return np.fromfile(path, self.dtype) if path.exists() else np.zeros(0, self.dtype)

    def remove(self, p: int) -> None:
        self.path(p).unlink(missing_ok=True)


def sorted_by_id(records: np.ndarray) -> np.ndarray:
    return records[np.argsort(records["id"], kind="stable")]


def lookup(keys: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(where each of ids is in keys: sorted unique S ids, whether it is there)."""
    if not len(keys):
        return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
    at = np.clip(np.searchsorted(keys, ids), 0, len(keys) - 1)
    return at, keys[at] == ids


class IndexIds:
    """The index's image ids (images.parquet, in row order) in buckets by id: (id, row) records."""

    def __init__(self, images, n: int, width: int, scratch: Path, count: int):
        import pyarrow.parquet as pq

        self.width, self.count, self._sorted = width, count, set()
        self.dtype = np.dtype([("id", f"S{width}"), ("row", "<i8")])
        out, at = Buckets(scratch, "index", self.dtype, count), 0
        pf = pq.ParquetFile(images, buffer_size=1 << 20, pre_buffer=False)
        for b in pf.iter_batches(batch_size=BATCH, columns=["image_id"]):
            rec = np.empty(len(b), self.dtype)
            rec["id"], rec["row"] = fixed_ids(b.column(0), width), np.arange(at, at + len(b))
            out.add(rec, id_hash(rec["id"]))
            at += len(b)
        if at != n:
            raise ValueError(f"{images}: {at} image ids for {n} rows")
        self.buckets = out.close()

    def bucket(self, p: int) -> np.ndarray:
        """Bucket p's (id, row) records sorted by id (sorted once: the file is written back in that order)."""
        rec = self.buckets.read(p)
        if p not in self._sorted:
            rec = sorted_by_id(rec)
            rec.tofile(self.buckets.path(p))
            self._sorted.add(p)
        return rec


def shared_ids_streamed(rows_a, rows_b, scratch: Path) -> np.ndarray:
    """The image ids in both indexes (images.parquet of each), sorted unique bytes (S): held only for the images
    in both, each side read a batch at a time."""
    width = max(rows_a.id_width, rows_b.id_width)
    count = buckets_for(rows_a.n, rows_b.n)
    sides = [IndexIds(r.images, r.n, width, Path(scratch) / name, count) for name, r in (("a", rows_a), ("b", rows_b))]
    both = []
    for p in range(count):
        a, b = (s.buckets.read(p)["id"] for s in sides)
        both.append(np.intersect1d(a, b))
    return np.sort(np.concatenate(both)) if both else np.zeros(0, f"S{width}")


def ids_at(images, rows: np.ndarray, width: int) -> np.ndarray:
    """The image ids (S{width}) of the given rows of images.parquet, in the order given, from one pass over
    the file a batch at a time: held only for those rows."""
    import pyarrow.parquet as pq

    rows = np.asarray(rows, np.int64)
    want = np.unique(rows)
    got = np.zeros(len(want), f"S{width}")
    at = 0
    for b in pq.ParquetFile(images, buffer_size=1 << 20, pre_buffer=False).iter_batches(
        batch_size=BATCH, columns=["image_id"]
    ):
        lo, hi = np.searchsorted(want, [at, at + len(b)])
        if hi > lo:
            got[lo:hi] = fixed_ids(b.column(0).take(want[lo:hi] - at), width)
        at += len(b)
        if hi == len(want):
            break
    return got[np.searchsorted(want, rows)]


class Across:
    """A rectangle's images in both indexes (shared_ids_streamed's join of the two images.parquet files: held
    only for those images), and the pairs of the background sample keep_across keeps."""

    def __init__(self, rows_a, rows_b, scratch):
        try:
            self.shared_bytes = shared_ids_streamed(rows_a, rows_b, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        self.rows_a, self.rows_b, self.shared = rows_a, rows_b, len(self.shared_bytes)
        n = self.shared  # the rectangle's pairs of two different images, each once
        self.pairs = rows_a.n * rows_b.n - n - n * (n - 1) // 2

    def kept(self, i, j):
        """Rows i of A, j of B less the pairs keep_across drops (the background sample's pairs)."""
        from vhmine.mine.join import keep_across

        if not self.shared:
            return i, j
        ids = [
            np.char.decode(ids_at(r.images, x, r.id_width), "utf-8").astype(object)
            for r, x in ((self.rows_a, i), (self.rows_b, j))
        ]
        keep = keep_across(*ids)
        return i[keep], j[keep]
