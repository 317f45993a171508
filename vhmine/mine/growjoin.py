"""A grown index's rows joined by image id with the earlier run's (mine.grow's Earlier: its folder's
rows.parquet and alike.parquet, mine.state), streamed from disk in buckets (mine.idjoin), so that the Ray
driver's memory does not grow with the collection: which rows are new (before the scan), how many are kept,
removed or changed (against the scan's digests: mine.grow's Growth), and the earlier run's CLIP-alike pairs
renumbered as rows of the index now (mine.grow's old_pairs), a bucket at a time. The matched rows' earlier
digests go, by row range, to files the scan's digests are compared with range by range; the earlier pairs go
through two rounds (by id a, then by id b). With one bucket (an index of up to BUCKET_ROWS rows) every output
comes in the order the in-memory joins (mine.grow) give it. Writes only under its scratch folder, which
`GrowthJoin.remove` deletes.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import numpy as np

from vhmine.mine import idjoin
from vhmine.mine.idjoin import Buckets, IndexIds, buckets_for, fixed_ids, id_hash


def new_rows_and_matches(index: IndexIds, earlier_rows: Path, scratch: Path, measure=lambda: None):
    """Join the index's ids with the earlier run's rows.parquet: (the index's rows the earlier run did not mine,
    sorted; how many of its rows are gone; Buckets of the (row, earlier digest) of every row both hold, filed
    by row range of idjoin.BUCKET_ROWS rows)."""
    import pyarrow.parquet as pq

    edt = np.dtype([("id", f"S{index.width}"), ("digest", "<u8")])
    earlier = Buckets(scratch, "earlier", edt, index.count)
    for b in pq.ParquetFile(earlier_rows).iter_batches(batch_size=idjoin.BATCH, columns=["image_id", "digest"]):
        rec = np.empty(len(b), edt)
        rec["id"], rec["digest"] = fixed_ids(b.column(0), index.width), b.column(1).to_numpy()
        earlier.add(rec, id_hash(rec["id"]))
    earlier.close()
    measure()  # (the scratch folder at its largest: both sides in buckets)
    mdt = np.dtype([("row", "<i8"), ("digest", "<u8")])
    ranges = index.count  # (the index's n rows span at most count ranges of idjoin.BUCKET_ROWS)
    matches = Buckets(scratch, "matched", mdt, ranges)
    new, removed = [], 0
    for p in range(index.count):
        mine, theirs = index.buckets.read(p), idjoin.sorted_by_id(earlier.read(p))
        at, seen = idjoin.lookup(theirs["id"], mine["id"])
        new.append(mine["row"][~seen])
        removed += len(theirs) - int(seen.sum())
        m = np.empty(int(seen.sum()), mdt)
        m["row"], m["digest"] = mine["row"][seen], theirs["digest"][at[seen]]
        matches.add(m, (m["row"] // idjoin.BUCKET_ROWS).astype(np.uint64))
        earlier.remove(p)
    new = np.sort(np.concatenate(new)) if new else np.zeros(0, np.int64)
    return new, removed, matches.close()


def compare_digests(matches: Buckets, digest_parts, n: int) -> tuple[int, int]:
    """(kept, changed): of the rows both hold, those whose digest now (digest_parts: every row's, in row order,
    cut anywhere; the scan's) equals the earlier one, and the others; a row range at a time."""
    from vhmine.index import regrouped

    kept = changed = 0
    ranges = regrouped(digest_parts, idjoin.BUCKET_ROWS, np.concatenate)
    for r in range(-(-n // idjoin.BUCKET_ROWS)):
        now = next(ranges)
        m = matches.read(r) if r < matches.count else np.zeros(0, matches.dtype)
        same = int((now[m["row"] - r * idjoin.BUCKET_ROWS] == m["digest"]).sum())
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
    for b in pq.ParquetFile(earlier_alike).iter_batches(batch_size=idjoin.BATCH, columns=cols):
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
        at, seen = idjoin.lookup(keys["id"], pairs["id_a"])
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
        at, seen = idjoin.lookup(keys["id"], pairs["id_b"])
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


class GrowthJoin:
    """A band's rows joined with the earlier run's (mine.grow.Earlier's folder: rows.parquet, alike.parquet),
    in buckets under `scratch`: the new rows at once; the growth once the scan has the digests; the earlier
    pairs renumbered, a bucket at a time. `stats` (run.json's incremental.join): the buckets, the join's CPU
    seconds on the driver and the scratch folder's largest size. `remove` deletes the scratch folder."""

    def __init__(self, earlier, rows, scratch):
        import pyarrow.parquet as pq

        from vhmine.index import id_width
        from vhmine.mine.state import ROWS

        self.folder, self.scratch, self.n = Path(earlier.folder), Path(scratch), rows.n
        self.stats = {"buckets": 0, "cpu_seconds": 0.0, "scratch_peak_bytes": 0}
        self.remove()
        try:
            with self._timed():
                width = max(rows.id_width, id_width(self.folder / ROWS))
                count = buckets_for(rows.n, pq.ParquetFile(self.folder / ROWS).metadata.num_rows)
                self.stats["buckets"] = count
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

    def _measure(self) -> None:
        size = sum(p.stat().st_size for p in self.scratch.iterdir() if p.is_file())
        self.stats["scratch_peak_bytes"] = max(self.stats["scratch_peak_bytes"], size)

    @contextlib.contextmanager
    def _timed(self):
        t0 = time.process_time()
        try:
            yield
        finally:
            self.stats["cpu_seconds"] = round(self.stats["cpu_seconds"] + time.process_time() - t0, 3)

    def remove(self) -> None:
        import shutil

        shutil.rmtree(self.scratch, ignore_errors=True)
