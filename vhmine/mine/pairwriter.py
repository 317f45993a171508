"""PairWriter: the Ray engine's pairs table (pairs.parquet and pairs.csv, mine.write's layout and bytes) from
ranked pairs that arrive in rank order (the merge of the job's tiles), with memory bounded by constants: never
by the index's rows, nor by the pairs' count.

A pair's row shows both its images' columns (image_id, sha256, path, coco_id, categories) from images.parquet,
and the pairs come in rank order while the images are in row order. So the pairs are joined with the images
on disk, in a scratch folder under the run's temporary folder (removed by close):

    ranked.bin      the pairs (a, b, clip, dino, gap) in rank order, as they arrive
    a-NNNNNN.bin    (rank, row) of each pair, filed by the row range (mine.idjoin.BUCKET_ROWS rows) of its
    b-NNNNNN.bin    image a, and of its image b
    a-NNNNNN.arrows the image columns of side a (b) of the pairs of one rank range (RANK_ROWS pairs), with
    b-NNNNNN.arrows each pair's rank: one pass over images.parquet (each side's), a row range at a time

Then each rank range's frame (mine.write.pairs_frame) is written, in rank order, into pairs.parquet (one file
while the run has at most `shard_rows` pairs, else a folder of part-NNNNN.parquet shards, each range a row
group) and appended to pairs.csv. Each step holds one row range of images, one chunk of a bucket or one rank
range of pairs; the images are read twice (once a side), whatever the pairs' count. `head` keeps the first
rows for the gallery.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from vhmine.mine import write
from vhmine.mine.write import IMAGE_COLUMNS, pairs_frame, side

RANK_ROWS = 65_536  # pairs of one frame (a rank range)
READ_ROWS = 1 << 16  # pairs read at a time from the ranked file and from a bucket
PAIR = np.dtype([("a", "<i8"), ("b", "<i8"), ("clip", "<f8"), ("dino", "<f8"), ("gap", "<f8")])
SCRATCH = ".pairs-work"


class PairWriter:
    """pairs.parquet and pairs.csv of ranked row chunks (fields a, b, clip, dino, gap at least), in order."""

    def __init__(
        self,
        folder: Path,
        images_parquet: Path,
        locations,
        *,
        shard_rows: int | None = None,
        head_rows: int = 100,
        side_b: tuple | None = None,
        columns: dict | None = None,
    ):
        """locations: index.CollectionIndex.locations of the index; side_b: (images.parquet, locations) of the
        index side b comes from, when not the same (--against); columns: constant columns added after the others
        (--against: index_a, index_b)."""
        self.folder = Path(folder)
        a = (Path(images_parquet), locations)
        self.sides = {"a": a, "b": (Path(side_b[0]), side_b[1]) if side_b else a}  # side: (images.parquet, locations)
        self.columns = columns or {}
        self.shard_rows = shard_rows or write.SHARD_ROWS
        self.head_rows = head_rows
        self.head = None
        self.work = self.folder / SCRATCH
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self._ranked = open(self.work / "ranked.bin", "wb")
        self.count = 0

    def add(self, rows: np.ndarray) -> None:
        out = np.empty(len(rows), PAIR)
        for f in PAIR.names:
            out[f] = rows[f]
        self._ranked.write(out.tobytes())
        self.count += len(out)

    def close(self) -> int:
        """Write the files (see the module docstring); returns the pairs written."""
        self._ranked.close()
        try:
            ranks = min(RANK_ROWS, self.shard_rows)
            metas = {s: _side_columns(self.work, s, self.sides[s][0], self.count, ranks) for s in ("a", "b")}
            self._write(ranks, metas)
        finally:
            shutil.rmtree(self.work, ignore_errors=True)
        return self.count

    def _keep_head(self, frame) -> None:
        """The gallery's first head_rows pairs, across ranges."""
        if self.head is None:
            self.head = frame.head(self.head_rows)
        elif len(self.head) < self.head_rows:
            import pandas as pd

            self.head = pd.concat([self.head, frame.head(self.head_rows - len(self.head))], ignore_index=True)

    def _ranked_rows(self, start: int, stop: int) -> np.ndarray:
        with open(self.work / "ranked.bin", "rb") as f:
            f.seek(start * PAIR.itemsize)
            return np.fromfile(f, PAIR, stop - start)

    def _write(self, ranks: int, metas: dict) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        from vhmine.mine.csvtext import write_csv

        single = self.folder / "pairs.parquet"
        sharded = self.count > self.shard_rows
        if sharded:
            single.mkdir(exist_ok=True)
        writer, shard = None, -1
        with open(self.folder / "pairs.csv", "wb") as csv:
            for q, start in enumerate(range(0, max(self.count, 1), ranks)):  # (no pairs: one empty frame)
                rows = self._ranked_rows(start, min(self.count, start + ranks))
                sides = [side(metas[s](q), np.arange(len(rows)), self.sides[s][1]) for s in ("a", "b")]
                frame = pairs_frame(start + 1, *sides, rows["clip"], rows["dino"], rows["gap"])
                for col, value in self.columns.items():
                    frame[col] = value
                self._keep_head(frame)
                table = pa.Table.from_pandas(frame, preserve_index=False)
                if start // self.shard_rows != shard:
                    if writer is not None:
                        writer.close()
                    shard = start // self.shard_rows
                    target = single / f"part-{shard:05d}.parquet" if sharded else single
                    writer = pq.ParquetWriter(target, table.schema, compression="snappy")
                # (a range whose categories are all empty infers another list type: the shard's schema holds)
                writer.write_table(table if table.schema.equals(writer.schema) else table.cast(writer.schema))
                write_csv(table, csv, header=start == 0)
        writer.close()


def _side_columns(work: Path, name: str, images: Path, count: int, ranks: int):
    """The image columns of side `name` of every pair, filed by rank range: a function of the rank range q
    giving its DataFrame (index.image_frame), one row per pair of the range in rank order."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vhmine.index import image_frame, image_ranges
    from vhmine.mine.idjoin import BUCKET_ROWS, Buckets, buckets_for

    rows_of = np.dtype([("k", "<i8"), ("row", "<i8")])
    # one bucket a row range of BUCKET_ROWS rows of images.parquet
    buckets = Buckets(work, name, rows_of, buckets_for(pq.ParquetFile(images).metadata.num_rows))
    at = 0
    for part in _chunks(work / "ranked.bin", PAIR):
        rec = np.empty(len(part), rows_of)
        rec["k"], rec["row"] = np.arange(at, at + len(part)), part[name]
        buckets.add(rec, (rec["row"] // BUCKET_ROWS).astype(np.uint64))
        at += len(part)
    buckets.close()
    metadata, ranges = image_ranges(images, IMAGE_COLUMNS, BUCKET_ROWS)
    files: set[int] = set()
    schema = None
    for r, table in enumerate(ranges if count else ()):
        schema = schema or table.schema
        for chunk in _chunks(buckets.path(r), rows_of):
            taken = table.take(pa.array(chunk["row"] - r * BUCKET_ROWS)).append_column("k", pa.array(chunk["k"]))
            q = chunk["k"] // ranks
            order = np.argsort(q, kind="stable")
            taken, q = taken.take(pa.array(order)), q[order]
            for g in np.unique(q):
                lo, hi = np.searchsorted(q, [g, g + 1])
                with open(work / f"{name}-{int(g):06d}.arrows", "ab") as out, pa.ipc.new_stream(out, taken.schema) as w:
                    w.write_table(taken.slice(lo, hi - lo))
                files.add(int(g))
        buckets.remove(r)
    if schema is None:  # no pairs: the file's own columns
        schema = pq.read_schema(images).remove_metadata()
        schema = pa.schema([schema.field(c) for c in IMAGE_COLUMNS if c in schema.names])

    def frame(q: int):
        path = work / f"{name}-{q:06d}.arrows"
        if q not in files:
            return image_frame(schema.empty_table(), metadata)
        tables = []
        with pa.OSFile(str(path), "rb") as f:
            while f.tell() < f.size():
                tables.append(pa.ipc.open_stream(f).read_all())
        t = pa.concat_tables(tables)
        t = t.take(pa.array(np.argsort(t.column("k").to_numpy(), kind="stable"))).drop_columns(["k"])
        path.unlink()
        return image_frame(t, metadata)

    return frame


def _chunks(path: Path, dtype: np.dtype):
    if not path.exists():
        return
    with open(path, "rb") as f:
        while len(part := np.fromfile(f, dtype, READ_ROWS)):
            yield part
