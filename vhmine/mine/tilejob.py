"""The job folder of a `vhmine mine --engine ray` run: what lets a stopped job resume.

    runs/.<run>.job/job.json      what the job is (index manifest checksum, thresholds, caps, tile side,
                                  rows) and, once the streaming pass is done, the quantisation parameters
    runs/.<run>.job/tiles.jsonl   one line per finished tile, appended and flushed to disk: its file, byte
                                  count, sha256, pair counts and the worker that mined it
    runs/.<run>.job/tiles/NNNNNNNNN.npy   one tile's pairs (TileJob.record writes it atomically, then the line)
    runs/.<run>.job/lock          held while a driver runs the job

A tile is done when its line is there and its file still has that size and checksum; any other tile is
mined (again). A job folder made for another command (other thresholds, caps, tile side or index) is
started over. A write the system refuses (a full disk) is one line (files.write_failed), the tiles
recorded before it kept. job.py deletes the folder once the run folder is written. Only the driver writes here:
tasks return their pairs, so the folder needs no shared filesystem.

Tiles are numbered row by row over the upper triangle of blocks: tile k is (row block, column block)
`tile_at(k)`, column block >= row block.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np

from vhmine.errors import InputError
from vhmine.files import atomic_write, atomic_write_text, write_failed

log = logging.getLogger(__name__)

JOB, LEDGER, TILES, LOCK = "job.json", "tiles.jsonl", "tiles", "lock"
FORMAT = 1

# an in-memory job's pairs (ray_engine.find_pairs_ray): rows i < j and their sims, sorted by (i, j)
PLAIN = np.dtype([("i", "<i8"), ("j", "<i8"), ("clip", "<f8"), ("dino", "<f8")])


def ranked_dtype(id_width: int) -> np.dtype:
    """A ranked job's pairs: oriented rows a, b (image id a < id b) with their ids, the sims and the gap,
    and the unoriented rows lo < hi (the last tie-break, as rank_pairs' stable sort of (i, j)-sorted pairs)."""
    ids = f"S{id_width}"
    return np.dtype([("a", "<i8"), ("b", "<i8"), ("id_a", ids), ("id_b", ids), ("clip", "<f8"), ("dino", "<f8"),
                     ("gap", "<f8"), ("lo", "<i8"), ("hi", "<i8")])


def rank_order(rows: np.ndarray) -> np.ndarray:
    """The order of ranked rows: gap descending, then image ids, then rows (job.rank_pairs' order)."""
    return np.lexsort((rows["hi"], rows["lo"], rows["id_b"], rows["id_a"], -rows["gap"]))


def rank_key(row) -> tuple:
    return (-float(row["gap"]), bytes(row["id_a"]), bytes(row["id_b"]), int(row["lo"]), int(row["hi"]))


class Triangle:
    """The tiles of the upper triangle of `blocks` x `blocks` row blocks of `side` rows, row by row."""

    def __init__(self, rows: int, side: int):
        self.side = side
        self.blocks = -(-rows // side) if rows else 0
        t = self.blocks
        self.starts = np.array([a * t - a * (a - 1) // 2 for a in range(t + 1)], np.int64)  # first tile of row a

    def __len__(self) -> int:
        return int(self.starts[-1])

    def tile_at(self, k: int) -> tuple[int, int]:
        """First rows (r, c) of tile k."""
        a = int(np.searchsorted(self.starts, k, "right")) - 1
        return a * self.side, (a + int(k - self.starts[a])) * self.side


class TileJob:
    """An open job folder (under its lock): `done` maps tile number -> ledger entry of a verified tile."""

    def __init__(self, folder: Path, identity: dict):
        self.folder, self.identity = Path(folder), identity
        self.done: dict[int, dict] = {}
        self.job: dict = {}
        self._lock = None

    def open(self) -> "TileJob":
        import fcntl

        with self._writing():
            self.folder.mkdir(parents=True, exist_ok=True)
            f = open(self.folder / LOCK, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise InputError(f"another `vhmine mine` is running this job ({self.folder}); wait for it to finish") from None
        self._lock = f
        try:
            with self._writing():
                self._load()
        except BaseException:
            self.close()
            raise
        return self

    def _load(self) -> None:
        path = self.folder / JOB
        try:
            job = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        except (OSError, json.JSONDecodeError):
            job = None
        if job is not None and job.get("identity") != self.identity:
            old = job.get("identity") or {}
            diff = sorted(k for k in set(old) | set(self.identity) if old.get(k) != self.identity.get(k))
            log.warning("the job folder %s was made for another command (%s differ): starting the job over",
                        self.folder, ", ".join(diff))
            job = None
        if job is None:
            shutil.rmtree(self.folder / TILES, ignore_errors=True)
            (self.folder / LEDGER).unlink(missing_ok=True)
            job = {"format": FORMAT, "identity": self.identity}
            atomic_write_text(path, json.dumps(job, indent=2))
        self.job = job
        (self.folder / TILES).mkdir(exist_ok=True)
        self.done = self._verified(self._ledger())

    def _ledger(self) -> dict[int, dict]:
        entries: dict[int, dict] = {}
        path = self.folder / LEDGER
        if not path.is_file():
            return entries
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                e = json.loads(line)
                entries[int(e["tile"])] = e
            except (ValueError, KeyError, TypeError):  # a line cut short when the driver stopped
                continue
        return entries

    def _verified(self, entries: dict[int, dict]) -> dict[int, dict]:
        from vhmine.images import sha256_file

        good = {}
        for k, e in entries.items():
            p = self.folder / e["file"]
            if p.is_file() and p.stat().st_size == e["bytes"] and sha256_file(p) == e["sha256"]:
                good[k] = e
            else:
                log.warning("tile %d: its file %s is missing or changed; mining it again", k, p)
        return good

    def close(self) -> None:
        if self._lock is not None:
            import fcntl

            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    def remove(self) -> None:
        """The whole folder, once its run folder is written."""
        self.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    # --- what the job records ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _writing(self):
        """A write the system refuses (a full disk) becomes files.write_failed's one line."""
        try:
            yield
        except OSError as err:
            raise write_failed(self.folder, err, f"the {len(self.done)} tile(s) recorded before it are kept",
                               "free some space and run the same command: it resumes from them") from None

    def save(self, **fields) -> None:
        self.job.update(fields)
        with self._writing():
            atomic_write_text(self.folder / JOB, json.dumps(self.job, indent=2))

    def tile_file(self, k: int) -> Path:
        return self.folder / TILES / f"{k:09d}.npy"

    def record(self, k: int, rows: np.ndarray, info: dict) -> dict:
        """Write tile k's rows atomically, then its ledger line (the line says the tile is done)."""
        from vhmine.images import sha256_file

        path = self.tile_file(k)
        with self._writing():
            atomic_write(path, lambda tmp: _save_npy(tmp, rows))
            entry = {"tile": k, "file": path.relative_to(self.folder).as_posix(), "bytes": path.stat().st_size,
                     "sha256": sha256_file(path), **info}
            with open(self.folder / LEDGER, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")
                f.flush()
                os.fsync(f.fileno())
        self.done[k] = entry
        return entry

    def rows(self, k: int) -> "NpyRows":
        return NpyRows(self.tile_file(k))


class NpyRows:
    """The rows of a 1-D .npy file read by slice (positioned reads: no memory map, whose page faults would
    put the cached file around each touched row into the reader's resident set)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        with open(self.path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            shape, _, self.dtype = read(f)
            self.offset = f.tell()
        self.n = int(shape[0])

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: slice) -> np.ndarray:
        start, stop, _ = s.indices(self.n)
        if stop <= start:
            return np.empty(0, self.dtype)
        with open(self.path, "rb") as f:
            f.seek(self.offset + start * self.dtype.itemsize)
            return np.fromfile(f, self.dtype, stop - start)

    def at(self, rows: np.ndarray) -> np.ndarray:
        """Rows by number (one read each)."""
        return np.concatenate([self[int(r):int(r) + 1] for r in rows]) if len(rows) else np.empty(0, self.dtype)


def write_npy(path: Path, dtype: np.dtype, n: int, chunks) -> None:
    """A 1-D .npy file of n rows from chunks written one after another (no array of n rows in memory)."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                 "fortran_order": False, "shape": (n,)})
        at = 0
        for part in chunks:
            f.write(np.ascontiguousarray(part).tobytes())
            at += len(part)
    if at != n:
        raise ValueError(f"{path}: {at} rows written, {n} announced")


def _save_npy(path: Path, arr: np.ndarray) -> None:
    """np.save's file, its rows through Python's write: on a full disk that raises ENOSPC, where numpy's own
    (tofile) says only how many items it wrote."""
    arr = np.ascontiguousarray(arr)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(arr))
        f.write(arr.data.cast("B") if arr.size else b"")


@contextlib.contextmanager
def opened(folder: Path, identity: dict):
    job = TileJob(folder, identity).open()
    try:
        yield job
    finally:
        job.close()


def job_folder(run_dir: Path) -> Path:
    return Path(run_dir).parent / f".{Path(run_dir).name}.job"
