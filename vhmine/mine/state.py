"""What a finished run keeps so that a later run of the grown index mines only what is new (mine.grow):
the rows it mined, each by image id with a digest of its vectors, and every CLIP-alike pair it found.

    runs/<run>/rows.parquet    image_id, digest (uint64): one line per row of the index mined,
                               in its row order (index.row_digests); the schema's metadata
                               key DIGEST_KEY names the digests' kind (index.DIGEST; none: an
                               older vhmine's, which mine.grow does not trust)
    runs/<run>/alike.parquet   image_id_a, image_id_b, clip_sim, dino_sim: every pair with CLIP cosine >=
                               the run's --clip (in the box or not), oriented by image id (a < b)

The digests are index.row_digests'; the files are written by the engines (mine.local_run from its
arrays, through mine.write.write_whole; mine.ray_run from streams: write_rows_streamed holds one row group
at a time, whatever N) and read by mine.grow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROWS, ALIKE = "rows.parquet", "alike.parquet"
DIGEST_KEY = "vhmine.digest"  # rows.parquet's metadata: the kind of its digests
ROW_GROUP = 1 << 20  # rows.parquet's row groups: pq.write_table's default, so a streamed file is the same bytes


def write_state(
    folder, ids: np.ndarray, digests: np.ndarray, id_a: np.ndarray, id_b: np.ndarray, clip_sim, dino_sim
) -> None:
    """rows.parquet (the rows mined, in row order) and alike.parquet (every CLIP-alike pair by image ids,
    a < b) into a run's temporary folder, from arrays."""
    write_rows(folder, ids, digests)
    with AlikeWriter(folder) as w:
        w.add(id_a, id_b, clip_sim, dino_sim)


def id_column(images):
    """The image_id column of images.parquet's table (a DataFrame) as a pyarrow string array: what write_state
    writes, and what the local engine takes its pairs' ids from (pyarrow's take: no Python string a pair)."""
    import pyarrow as pa

    return pa.array(images["image_id"]).cast(pa.string())


def _strings(values):
    """A pyarrow string array of image ids: pyarrow arrays as they are (cast to string), numpy or lists through
    Python objects."""
    import pyarrow as pa

    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.cast(pa.string())
    return pa.array(np.asarray(values, dtype=object), pa.string())


def write_rows(folder, ids: np.ndarray, digests: np.ndarray) -> None:
    """rows.parquet from whole arrays (the local engine holds its rows anyway); digests are
    index.row_digests' (their kind is recorded with them)."""
    write_rows_streamed(folder, [ids], [digests])


def write_rows_streamed(folder, id_parts, digest_parts, group: int | None = None) -> int:
    """rows.parquet from two streams of the same rows in row order, each cut anywhere: image ids (str arrays,
    numpy or arrow) and their digests (uint64). Holds one row group of `group` rows [default ROW_GROUP] at a
    time, and writes the bytes pq.write_table writes for the whole table with row_group_size=group. Returns
    the rows written; ValueError when the streams' lengths differ."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vhmine.index import DIGEST, regrouped

    group = int(group or ROW_GROUP)
    schema = pa.schema([("image_id", pa.string()), ("digest", pa.uint64())], metadata={DIGEST_KEY: DIGEST})

    ids = regrouped((_strings(p) for p in id_parts), group, lambda xs: pa.concat_arrays(_chunks(xs)))
    digests = regrouped((np.asarray(d, np.uint64) for d in digest_parts), group, np.concatenate)
    n = 0
    with pq.ParquetWriter(Path(folder) / ROWS, schema) as w:
        for a in ids:
            d = next(digests, None)
            if d is None or len(d) != len(a):
                raise ValueError(f"rows.parquet: fewer digests than image ids (after row {n:,})")
            w.write_table(pa.table([a, pa.array(d)], schema=schema), row_group_size=group)
            n += len(a)
        if next(digests, None) is not None:
            raise ValueError(f"rows.parquet: more digests than the {n:,} image ids")
        if not n:  # pq.write_table writes one empty row group for an empty table
            w.write_table(schema.empty_table())
    return n


def _chunks(parts):
    for p in parts:
        yield from (p.chunks if hasattr(p, "chunks") else [p])


class AlikeWriter:
    """alike.parquet written chunk by chunk (a Ray run's tiles, one at a time)."""

    def __init__(self, folder):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        self.schema = pa.schema(
            [
                ("image_id_a", pa.string()),
                ("image_id_b", pa.string()),
                ("clip_sim", pa.float64()),
                ("dino_sim", pa.float64()),
            ]
        )
        self.writer = pq.ParquetWriter(Path(folder) / ALIKE, self.schema)

    def add(self, id_a, id_b, clip_sim, dino_sim) -> None:
        pa = self.pa
        self.writer.write_table(
            pa.table(
                [
                    _strings(id_a),
                    _strings(id_b),
                    pa.array(np.asarray(clip_sim, np.float64)),
                    pa.array(np.asarray(dino_sim, np.float64)),
                ],
                schema=self.schema,
            )
        )

    def __enter__(self) -> AlikeWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.writer.close()


def digest_kind(folder) -> str | None:
    """The kind of rows.parquet's digests (index.DIGEST), or None: an older vhmine's."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(Path(folder) / ROWS).metadata or {}
    kind = meta.get(DIGEST_KEY.encode())
    return kind.decode("utf-8", "replace") if kind is not None else None


def read_rows(folder):
    """(image ids, digests) of rows.parquet."""
    import pyarrow.parquet as pq

    t = pq.read_table(Path(folder) / ROWS)
    return t.column("image_id").to_numpy(zero_copy_only=False).astype(object), t.column("digest").to_numpy()


def read_alike(folder):
    """(image_id_a, image_id_b, clip_sim, dino_sim) of alike.parquet."""
    import pyarrow.parquet as pq

    t = pq.read_table(Path(folder) / ALIKE)
    return (
        t.column("image_id_a").to_numpy(zero_copy_only=False).astype(object),
        t.column("image_id_b").to_numpy(zero_copy_only=False).astype(object),
        t.column("clip_sim").to_numpy(),
        t.column("dino_sim").to_numpy(),
    )
