"""The pairs table of a run, as both engines write it: `pairs_frame` builds the columns, `write_table`
writes a whole table (the local engine's), and mine.pairwriter's PairWriter writes ranked pairs that arrive in
chunks (the Ray engine's merge) without holding them all, a rank range at a time.

Writes, into the run's temporary folder:

    pairs.parquet   one file while the run has at most SHARD_ROWS pairs; past that a folder of
                    part-NNNNN.parquet shards with the same columns (pandas.read_parquet and pyarrow read
                    the folder as one table)
    pairs.csv       one file, appended shard by shard (categories joined with |): the bytes pandas'
                    to_csv writes for the table, built column by column in pyarrow (mine.csvtext)

The local engine holds its pairs' image columns (its index's images table); the Ray engine's writer joins
them from images.parquet on disk (mine.pairwriter), so its memory follows neither the index nor the pairs.
Every column is built by numpy / pyarrow operations over the whole table (or rank range): no Python runs per
pair (a 50,000-row run's 53,574 pairs: their columns and both files in 0.15 CPU-s, against 1.5 when each path,
categories list and csv field was made one at a time).
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np

SHARD_ROWS = 1_000_000
IMAGE_COLUMNS = ["image_id", "sha256", "path", "coco_id", "categories"]  # what a pair shows of its images


def pairs_frame(first_rank: int, side_a: dict, side_b: dict, clip_sim, dino_sim, gap):
    """The pairs table's columns in their order; side_x holds image_id, sha256, path (absolute), coco_id
    (an Int64 array) and categories (a list or array of names each) of each pair's image x."""
    import pandas as pd

    n = len(clip_sim)
    cols = {"rank": np.arange(first_rank, first_rank + n, dtype=np.int64)}
    for key in ("image_id", "sha256", "path"):
        # no pairs: object columns, as an empty table has always been written (pyarrow's null type)
        cols[f"{key}_a"], cols[f"{key}_b"] = (
            x if n else np.asarray(x, dtype=object) for x in (side_a[key], side_b[key])
        )
    cols.update(clip_sim=clip_sim, dino_sim=dino_sim, gap=gap)
    for s, side in (("a", side_a), ("b", side_b)):
        cols[f"coco_id_{s}"] = side["coco_id"] if n else pd.array([], dtype="Int64")
    # (no pairs: empty lists, as an empty run has always been written: pandas makes them float64 columns)
    cols["categories_a"], cols["categories_b"] = (side["categories"] if n else [] for side in (side_a, side_b))
    return pd.DataFrame(cols)


def write_table(folder: Path, pairs) -> None:
    """A run's whole pairs table (the local engine's; PairWriter writes ranked chunks) as pairs.parquet
    (DataFrame.to_parquet's bytes: its arrow table, written as pandas writes it) and pairs.csv
    (mine.csvtext.write_csv: to_csv's bytes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vhmine.mine.csvtext import write_csv

    table = pa.Table.from_pandas(pairs, preserve_index=False)  # what to_parquet writes, converted once for both
    pq.write_table(table, Path(folder) / "pairs.parquet", compression="snappy")
    with open(Path(folder) / "pairs.csv", "wb") as f:
        write_csv(table, f, header=True)


def write_whole(folder: Path, pairs, head_rows: int, state: tuple | None = None):
    """A local run's Mined.write_pairs: its whole pairs table (write_table) and, for one index, the growth
    state (state: mine.state.write_state's arrays after the folder); returns (pairs written, the gallery's
    rows)."""
    write_table(folder, pairs)
    if state is not None:
        from vhmine.mine.state import write_state

        write_state(folder, *state)
    return len(pairs), pairs.head(head_rows)


def side(images, rows, locations) -> dict:
    """The image columns of `rows` of a DataFrame of images.parquet's columns; locations(paths) -> absolute, of
    an array of paths at once (index.CollectionIndex.locations). Each column a take of the whole column; the
    categories stay the arrays images.parquet's reader made (pyarrow writes them as the lists they are)."""
    rows = np.asarray(rows, dtype=np.int64)
    return {
        "image_id": _taken(images["image_id"], rows),
        "sha256": _taken(images["sha256"], rows),
        "path": locations(_taken(images["path"], rows)),
        "coco_id": images["coco_id"].array[rows],
        "categories": images["categories"].to_numpy()[rows],
    }


def _taken(col, rows):
    """A text column's values at rows: taken in its own dtype where that is the one pandas gives such values
    anyway (its str dtype: pandas 3; object: 2), else as numpy objects (which pairs_frame's DataFrame types as
    it always has)."""
    return col.array.take(rows) if col.dtype == _text_dtype() else col.to_numpy()[rows]


@functools.cache
def _text_dtype():
    import pandas as pd

    return pd.Series(np.array(["x"], dtype=object)).dtype
