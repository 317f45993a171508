"""What a finished run keeps so that a later run of the grown index mines only what is new (mine.grow):
the rows it mined, each by image id with a digest of its vectors, and every CLIP-alike pair it found.

    runs/<run>/rows.parquet    image_id, digest (uint64): one line per row of the index mined,
                               in its row order (`row_digests`)
    runs/<run>/alike.parquet   image_id_a, image_id_b, clip_sim, dino_sim: every pair with CLIP cosine >=
                               the run's --clip (in the box or not), oriented by image id (a < b)

Pure computation here (`row_digests`); the files are written by runfolder.finish_run's callers and read
by mine.grow.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

_DIGEST_ROWS = 8192  # rows hashed at a time


@functools.lru_cache(maxsize=8)
def _multipliers(words: int, seed: int) -> np.ndarray:
    # odd 64-bit multipliers: a change of any one 32-bit word changes the sum (an odd number is invertible mod 2^64)
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2**63, size=words, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def _words(x: np.ndarray) -> np.ndarray:
    """Rows of float32 as 64-bit words: two floats a word (a change of either half, by less than 2^32,
    still changes the word's product with an odd multiplier), or one when a row has an odd count."""
    return x.view(np.uint64) if x.shape[1] % 2 == 0 else x.view(np.uint32).astype(np.uint64)


def row_digests(clip: np.ndarray, dino: np.ndarray, workers=None) -> np.ndarray:
    """A uint64 digest of each row's float32 bits, CLIP's and DINOv2's: the sum, mod 2^64, of the
    rows' words (two float32 bits a word) times fixed odd random multipliers. Equal rows give equal digests on any machine
    (integer arithmetic); a row that differs in one word always gets another digest, in several words
    with a chance of about 2^-64 of the same. Linear, so it runs at memory speed (a cryptographic hash
    of every row would cost more than mining the new rows of a grown index). workers: see
    quantise._in_threads."""
    from vhmine.mine.quantise import _in_threads

    clip, dino = np.ascontiguousarray(clip, np.float32), np.ascontiguousarray(dino, np.float32)
    if len(clip) != len(dino):
        raise ValueError(f"clip has {len(clip)} rows, dino {len(dino)}")
    out = np.empty(len(clip), np.uint64)

    def chunk(s: int) -> None:
        acc = np.zeros(min(_DIGEST_ROWS, len(clip) - s), np.uint64)
        for part, x in enumerate((clip, dino)):
            w = _words(x[s:s + _DIGEST_ROWS])  # (numpy's integer arithmetic wraps mod 2^64)
            acc += np.multiply(w, _multipliers(w.shape[1], part + 0x766D)).sum(axis=1)
        out[s:s + _DIGEST_ROWS] = acc

    _in_threads(chunk, range(0, len(clip), _DIGEST_ROWS), workers)
    return out


ROWS, ALIKE = "rows.parquet", "alike.parquet"


def write_state(folder, ids: np.ndarray, digests: np.ndarray, id_a: np.ndarray, id_b: np.ndarray, clip_sim,
                dino_sim) -> None:
    """rows.parquet (the rows mined, in row order) and alike.parquet (every CLIP-alike pair by image ids,
    a < b) into a run's temporary folder, from arrays."""
    write_rows(folder, ids, digests)
    with AlikeWriter(folder) as w:
        w.add(id_a, id_b, clip_sim, dino_sim)


def write_rows(folder, ids: np.ndarray, digests: np.ndarray) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"image_id": pa.array(np.asarray(ids, dtype=object), pa.string()),
                             "digest": pa.array(np.asarray(digests, np.uint64))}), Path(folder) / ROWS)


class AlikeWriter:
    """alike.parquet written chunk by chunk (a Ray run's tiles, one at a time)."""

    def __init__(self, folder):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa = pa
        self.schema = pa.schema([("image_id_a", pa.string()), ("image_id_b", pa.string()),
                                 ("clip_sim", pa.float64()), ("dino_sim", pa.float64())])
        self.writer = pq.ParquetWriter(Path(folder) / ALIKE, self.schema)

    def add(self, id_a, id_b, clip_sim, dino_sim) -> None:
        pa = self.pa
        self.writer.write_table(pa.table([pa.array(np.asarray(id_a, dtype=object), pa.string()),
                                          pa.array(np.asarray(id_b, dtype=object), pa.string()),
                                          pa.array(np.asarray(clip_sim, np.float64)),
                                          pa.array(np.asarray(dino_sim, np.float64))], schema=self.schema))

    def __enter__(self) -> "AlikeWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.writer.close()


def read_rows(folder):
    """(image ids, digests) of rows.parquet."""
    import pyarrow.parquet as pq

    t = pq.read_table(Path(folder) / ROWS)
    return t.column("image_id").to_numpy(zero_copy_only=False).astype(object), t.column("digest").to_numpy()


def read_alike(folder):
    """(image_id_a, image_id_b, clip_sim, dino_sim) of alike.parquet."""
    import pyarrow.parquet as pq

    t = pq.read_table(Path(folder) / ALIKE)
    return (t.column("image_id_a").to_numpy(zero_copy_only=False).astype(object),
            t.column("image_id_b").to_numpy(zero_copy_only=False).astype(object),
            t.column("clip_sim").to_numpy(), t.column("dino_sim").to_numpy())
