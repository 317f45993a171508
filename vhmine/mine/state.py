"""What a finished run keeps so that a later run of the grown index mines only what is new (mine.grow):
the rows it mined, each by image id with a digest of its vectors, and every CLIP-alike pair it found.

    runs/<run>/rows.parquet    image_id, digest (uint64): one line per row of the index mined,
                               in its row order (mine.join.row_digests); the schema's metadata
                               `vhmine.digest` names the digests' kind (digests.DIGEST; none: an
                               older vhmine's, which mine.grow does not trust)
    runs/<run>/alike.parquet   image_id_a, image_id_b, clip_sim, dino_sim: every pair with CLIP cosine >=
                               the run's --clip (in the box or not), oriented by image id (a < b)

The digests are mine.join.row_digests'; the files are written by the engines' runs (mine.local_run,
mine.ray_run) and read by mine.grow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROWS, ALIKE = "rows.parquet", "alike.parquet"
DIGEST_KEY = "vhmine.digest"  # rows.parquet's metadata: the kind of its digests


def write_state(
    folder, ids: np.ndarray, digests: np.ndarray, id_a: np.ndarray, id_b: np.ndarray, clip_sim, dino_sim
) -> None:
    """rows.parquet (the rows mined, in row order) and alike.parquet (every CLIP-alike pair by image ids,
    a < b) into a run's temporary folder, from arrays."""
    write_rows(folder, ids, digests)
    with AlikeWriter(folder) as w:
        w.add(id_a, id_b, clip_sim, dino_sim)


def write_rows(folder, ids: np.ndarray, digests: np.ndarray) -> None:
    """rows.parquet: digests are mine.join.row_digests' (their kind is recorded with them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vhmine.mine.join.digests import DIGEST

    table = pa.table(
        {
            "image_id": pa.array(np.asarray(ids, dtype=object), pa.string()),
            "digest": pa.array(np.asarray(digests, np.uint64)),
        }
    )
    pq.write_table(table.replace_schema_metadata({DIGEST_KEY: DIGEST}), Path(folder) / ROWS)


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
                    pa.array(np.asarray(id_a, dtype=object), pa.string()),
                    pa.array(np.asarray(id_b, dtype=object), pa.string()),
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
    """The kind of rows.parquet's digests (mine.join.digests.DIGEST), or None: an older vhmine's."""
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
