"""The joins by image id of a Ray run, streamed from disk so that the driver's memory does not grow with the
collection: a grown index's rows against the earlier run's (which rows are new, kept, changed or removed:
mine.grow's Growth), the earlier run's CLIP-alike pairs renumbered as rows of the index now (mine.grow's
old_pairs), and the images in both indexes of `--against`.

A grace hash join: each side is read a batch at a time (images.parquet, the earlier run's rows.parquet and
alike.parquet: mine.state) and written, by a hash of the id's bytes, into one of `buckets` files of fixed-width
records under a scratch folder; then each bucket is joined alone, in memory. A bucket holds about BUCKET_ROWS
rows of either side whatever N, so the driver holds one bucket (and its sort), never a side. The matched rows'
earlier digests go, by row range, to files the scan's digests are compared with range by range (`growth`);
the earlier pairs go through two such rounds (by id a, then by id b), each bucket's renumbered pairs handed
to the caller as they are made (`old_pairs`).

Ids are compared as their UTF-8 bytes, padded with NUL to one width (the widest id of both sides), as
vhmine.index.rows.read_ids gives them: exact, with no hash trusted for equality. With one bucket (an index of
up to BUCKET_ROWS rows) every output comes in the order the in-memory joins (mine.grow) give it.
Writes only under the scratch folder it is given, which the caller removes.
"""

from __future__ import annotations

import contextlib
import time
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


def parquet_width(path, columns: list[str]) -> int:
    """The longest id in the given columns of a parquet file, in bytes (a pass over the columns)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    width = 1
    pf = pq.ParquetFile(path)
    for b in pf.iter_batches(batch_size=BATCH, columns=columns):
        for col in b.columns:
            if len(col):
                width = max(width, int(pc.max(pc.binary_length(col.cast("binary"))).as_py() or 0))
    return width


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


def _sorted_by_id(records: np.ndarray) -> np.ndarray:
    return records[np.argsort(records["id"], kind="stable")]


def _lookup(keys: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(where each of ids is in keys: sorted unique S ids, whether it is there)."""
    if not len(keys):
        return np.zeros(len(ids), np.int64), np.zeros(len(ids), bool)
    at = np.clip(np.searchsorted(keys, ids), 0, len(keys) - 1)
    return at, keys[at] == ids


class IndexIds:
    """The index's image ids (images.parquet, in row order) in buckets by id: (id, row) records."""

    def __init__(self, images, n: int, width: int, scratch: Path, count: int):
        import pyarrow.parquet as pq

        self.width, self.count = width, count
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
        """Bucket p's (id, row) records sorted by id."""
        return _sorted_by_id(self.buckets.read(p))


def new_rows_and_matches(index: IndexIds, earlier_rows: Path, scratch: Path, measure=lambda: None):
    """Join the index's ids with the earlier run's rows.parquet: (the index's rows the earlier run did not mine,
    sorted; how many of its rows are gone; Buckets of the (row, earlier digest) of every row both hold, filed
    by row range of BUCKET_ROWS rows)."""
    import pyarrow.parquet as pq

    edt = np.dtype([("id", f"S{index.width}"), ("digest", "<u8")])
    earlier = Buckets(scratch, "earlier", edt, index.count)
    for b in pq.ParquetFile(earlier_rows).iter_batches(batch_size=BATCH, columns=["image_id", "digest"]):
        rec = np.empty(len(b), edt)
        rec["id"], rec["digest"] = fixed_ids(b.column(0), index.width), b.column(1).to_numpy()
        earlier.add(rec, id_hash(rec["id"]))
    earlier.close()
    measure()  # (the scratch folder at its largest: both sides in buckets)
    mdt = np.dtype([("row", "<i8"), ("digest", "<u8")])
    ranges = index.count  # (the index's n rows span at most count ranges of BUCKET_ROWS)
    matches = Buckets(scratch, "matched", mdt, ranges)
    new, removed = [], 0
    for p in range(index.count):
        mine, theirs = index.buckets.read(p), _sorted_by_id(earlier.read(p))
        at, seen = _lookup(theirs["id"], mine["id"])
        new.append(mine["row"][~seen])
        removed += len(theirs) - int(seen.sum())
        m = np.empty(int(seen.sum()), mdt)
        m["row"], m["digest"] = mine["row"][seen], theirs["digest"][at[seen]]
        matches.add(m, (m["row"] // BUCKET_ROWS).astype(np.uint64))
        earlier.remove(p)
    new = np.sort(np.concatenate(new)) if new else np.zeros(0, np.int64)
    return new, removed, matches.close()


def compare_digests(matches: Buckets, digest_parts, n: int) -> tuple[int, int]:
    """(kept, changed): of the rows both hold, those whose digest now (digest_parts: every row's, in row order,
    cut anywhere; the scan's) equals the earlier one, and the others; a row range at a time."""
    from vhmine.mine.state import _regrouped

    kept = changed = 0
    ranges = _regrouped(digest_parts, BUCKET_ROWS, np.concatenate)
    for r in range(-(-n // BUCKET_ROWS)):
        now = next(ranges)
        m = matches.read(r) if r < matches.count else np.zeros(0, matches.dtype)
        same = int((now[m["row"] - r * BUCKET_ROWS] == m["digest"]).sum())
        kept, changed = kept + same, changed + len(m) - same
    return kept, changed


def old_pairs(index: IndexIds, earlier_alike: Path, scratch: Path, measure=lambda: None):
    """The earlier run's CLIP-alike pairs (alike.parquet) whose two images are rows of the index now, a bucket
    at a time: yields (i, j, clip, dino, id_i, id_j), i < j rows of the index now."""
    import pyarrow.parquet as pq

    w = index.width
    first = np.dtype([("id_a", f"S{w}"), ("id_b", f"S{w}"), ("clip", "<f8"), ("dino", "<f8")])
    by_a = Buckets(scratch, "alike-a", first, index.count)
    cols = ["image_id_a", "image_id_b", "clip_sim", "dino_sim"]
    for b in pq.ParquetFile(earlier_alike).iter_batches(batch_size=BATCH, columns=cols):
        rec = np.empty(len(b), first)
        rec["id_a"], rec["id_b"] = fixed_ids(b.column(0), w), fixed_ids(b.column(1), w)
        rec["clip"], rec["dino"] = b.column(2).to_numpy(), b.column(3).to_numpy()
        by_a.add(rec, id_hash(rec["id_a"]))
    by_a.close()
    measure()
    second = np.dtype([("a", "<i8"), ("id_a", f"S{w}"), ("id_b", f"S{w}"), ("clip", "<f8"), ("dino", "<f8")])
    by_b = Buckets(scratch, "alike-b", second, index.count)
    for p in range(index.count):
        keys, pairs = index.bucket(p), by_a.read(p)
        at, seen = _lookup(keys["id"], pairs["id_a"])
        rec = np.empty(int(seen.sum()), second)
        rec["a"] = keys["row"][at[seen]]
        for f in ("id_a", "id_b", "clip", "dino"):
            rec[f] = pairs[f][seen]
        by_b.add(rec, id_hash(rec["id_b"]))
        by_a.remove(p)
    by_b.close()
    measure()
    for p in range(index.count):
        keys, pairs = index.bucket(p), by_b.read(p)
        at, seen = _lookup(keys["id"], pairs["id_b"])
        pairs, b = pairs[seen], keys["row"][at[seen]]
        a = pairs["a"]
        swap = a > b
        yield (
            np.where(swap, b, a),
            np.where(swap, a, b),
            pairs["clip"],
            pairs["dino"],
            np.where(swap, pairs["id_b"], pairs["id_a"]),
            np.where(swap, pairs["id_a"], pairs["id_b"]),
        )
        by_b.remove(p)


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


class GrowthJoin:
    """A band's rows joined with the earlier run's (mine.grow.Earlier's folder: rows.parquet, alike.parquet),
    in buckets under `scratch`: the new rows at once; the growth once the scan has the digests; the earlier
    pairs renumbered, a bucket at a time. `stats` (run.json's incremental.join): the buckets, the join's CPU
    seconds on the driver and the scratch folder's largest size. `remove` deletes the scratch folder."""

    def __init__(self, earlier, rows, scratch):
        import pyarrow.parquet as pq

        from vhmine.mine.state import ROWS

        self.folder, self.scratch, self.n = Path(earlier.folder), Path(scratch), rows.n
        self.remove()
        try:
            with self._timed():
                width = max(rows.id_width, parquet_width(self.folder / ROWS, ["image_id"]))
                count = buckets_for(rows.n, pq.ParquetFile(self.folder / ROWS).metadata.num_rows)
                self.stats = {"buckets": count, "cpu_seconds": 0.0, "scratch_peak_bytes": 0}
                self.index = IndexIds(rows.images, rows.n, width, self.scratch, count)
                self.new_rows, self.removed, self.matches = new_rows_and_matches(
                    self.index, self.folder / ROWS, self.scratch, self._measure
                )
        except BaseException:
            self.remove()
            raise

    def growth(self, digest_parts):
        """mine.grow.Growth of the index now against the earlier run, digest_parts: the scan's digests."""
        from vhmine.mine.grow import Growth

        with self._timed():
            kept, changed = compare_digests(self.matches, digest_parts, self.n)
            for p in range(self.matches.count):
                self.matches.remove(p)
        return Growth(self.new_rows, kept, self.removed, changed)

    def old_pairs(self):
        """old_pairs over the earlier run's alike.parquet: a bucket's (i, j, clip, dino, id_i, id_j) at a time."""
        from vhmine.mine.state import ALIKE

        pairs = old_pairs(self.index, self.folder / ALIKE, self.scratch, self._measure)
        while True:
            with self._timed():
                part = next(pairs, None)
            if part is None:
                return
            yield part
        self._measure()

    def _measure(self) -> None:
        size = sum(p.stat().st_size for p in self.scratch.iterdir() if p.is_file())
        self.stats["scratch_peak_bytes"] = max(self.stats.get("scratch_peak_bytes", 0), size)

    @contextlib.contextmanager
    def _timed(self):
        t0 = time.process_time()
        try:
            yield
        finally:
            if hasattr(self, "stats"):
                self.stats["cpu_seconds"] = round(self.stats["cpu_seconds"] + time.process_time() - t0, 3)

    def remove(self) -> None:
        import shutil

        shutil.rmtree(self.scratch, ignore_errors=True)
