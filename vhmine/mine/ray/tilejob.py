"""The job folder of a `vhmine mine --engine ray` run: what lets a stopped job resume.

    runs/.<run>.job/job.json      what the job is (index manifest checksum, thresholds, caps, tile side,
                                  rows) and, once the streaming pass is done, the quantisation parameters
    runs/.<run>.job/tiles.jsonl   one line per finished tile, appended and flushed to disk: its file, byte
                                  count, sha256, pair counts and the worker that mined it
    runs/.<run>.job/tiles/NNNNNNNNN.npy   one tile's pairs (TileJob.record writes it atomically, then the line)
    runs/.<run>.job/scan.jsonl    one line per scanned row chunk (side "a", or "b" for a rectangle's second
                                  index): its rows, largest turned component, levels and, when asked, its
                                  digests file (below) with byte count and sha256
    runs/.<run>.job/digests/S-NNNNNNNNN.npy   one chunk's index.row_digests (uint64), side S
    runs/.<run>.job/lock          held while a driver runs the job

A tile is done when its line is there and its file still has that size and checksum; any other tile is
mined (again). A job folder made for another command (other thresholds, caps, tile side or index) is
started over. A write the system refuses (a full disk) is one line (files.write_failed), the tiles
recorded before it kept. The Ray engine (mine.ray_run) deletes the folder once the run folder is written.
Only the driver writes here: tasks return their pairs, so the folder needs no shared filesystem.

The tiles' shapes and numbers are mine.ray.tileshapes' (Triangle, Band, Rectangle); a shape's record() belongs
in the identity. A scanned chunk is kept like a tile (so a resumed scan reads only the chunks not yet done,
and a job's digests survive a stop); `digests(side)` gives them back in row order.
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
from vhmine.mine.ray.tileshapes import Band, Rectangle, Triangle  # noqa: F401  (the job's shapes, named here too)

log = logging.getLogger(__name__)

JOB, LEDGER, TILES, LOCK = "job.json", "tiles.jsonl", "tiles", "lock"
SCAN, DIGESTS = "scan.jsonl", "digests"
FORMAT = 1

# an in-memory job's pairs (mine.ray.arrays.find_pairs_ray): rows i < j and their sims, sorted by (i, j)
PLAIN = np.dtype([("i", "<i8"), ("j", "<i8"), ("clip", "<f8"), ("dino", "<f8")])


def ranked_dtype(id_width: int) -> np.dtype:
    """A ranked job's pairs: oriented rows a, b (image id a < id b) with their ids, the sims and the gap,
    and the unoriented rows lo < hi (the last tie-break, as rank_pairs' stable sort of (i, j)-sorted pairs)."""
    ids = f"S{id_width}"
    return np.dtype(
        [
            ("a", "<i8"),
            ("b", "<i8"),
            ("id_a", ids),
            ("id_b", ids),
            ("clip", "<f8"),
            ("dino", "<f8"),
            ("gap", "<f8"),
            ("lo", "<i8"),
            ("hi", "<i8"),
        ]
    )


def rank_order(rows: np.ndarray) -> np.ndarray:
    """The order of ranked rows: gap descending, then image ids, then rows (mine.rank.rank_pairs' order)."""
    return np.lexsort((rows["hi"], rows["lo"], rows["id_b"], rows["id_a"], -rows["gap"]))


def rank_key(row) -> tuple:
    return (-float(row["gap"]), bytes(row["id_a"]), bytes(row["id_b"]), int(row["lo"]), int(row["hi"]))


def orient_by_id(out: np.ndarray, i, j, id_i, id_j) -> None:
    """A ranked table's a, b, id_a, id_b: each pair (i, j) oriented so that id_a < id_b (as mine.rank.ranked
    orients it)."""
    swap = id_i > id_j
    out["a"], out["b"] = np.where(swap, j, i), np.where(swap, i, j)
    out["id_a"], out["id_b"] = np.where(swap, id_j, id_i), np.where(swap, id_i, id_j)


def box_first(out: np.ndarray, box: np.ndarray, top: int | None, sample: int | None = None):
    """(the rows a ranked tile file holds, how many are in the box, how many follow them): the in-box rows in
    rank order (the first `top` when given), then the others: every one, the in-box rows `top` cut included
    (sample None: all CLIP-alike pairs kept), or an even sample of at most `sample` of those outside the box."""
    inside = out[box][rank_order(out[box])]
    cut = inside[top:] if top is not None else inside[:0]
    inside = inside if top is None else inside[:top]
    rest = out[~box]  # in (i, j) order
    if sample is None:
        rest = np.concatenate([cut, rest])
    elif len(rest) > sample:
        rest = rest[np.unique(np.linspace(0, len(rest) - 1, sample).astype(np.int64))] if sample else rest[:0]
    return np.concatenate([inside, rest]), len(inside), len(rest)


class TileJob:
    """An open job folder (under its lock): `done` maps tile number -> ledger entry of a verified tile."""

    def __init__(self, folder: Path, identity: dict):
        self.folder, self.identity = Path(folder), identity
        self.done: dict[int, dict] = {}
        self.chunks: dict[tuple[str, int], dict] = {}  # (side, first row) -> scan ledger entry
        self.job: dict = {}
        self._lock = None

    def open(self) -> TileJob:
        import fcntl

        with self._writing():
            self.folder.mkdir(parents=True, exist_ok=True)
            f = open(self.folder / LOCK, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            raise InputError(
                f"another `vhmine mine` is running this job ({self.folder}); wait for it to finish"
            ) from None
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
            log.warning(
                "the job folder %s was made for another command (%s differ): starting the job over",
                self.folder,
                ", ".join(diff),
            )
            job = None
        if job is None:
            for sub in (TILES, DIGESTS):
                shutil.rmtree(self.folder / sub, ignore_errors=True)
            for name in (LEDGER, SCAN):
                (self.folder / name).unlink(missing_ok=True)
            job = {"format": FORMAT, "identity": self.identity}
            atomic_write_text(path, json.dumps(job, indent=2))
        self.job = job
        (self.folder / TILES).mkdir(exist_ok=True)
        self.done = self._verified(self._ledger(LEDGER, lambda e: int(e["tile"])), "tile %s", "mining it again")
        chunks = self._ledger(SCAN, lambda e: (str(e["side"]), int(e["start"])))
        good = self._verified({k: e for k, e in chunks.items() if "file" in e}, "row chunk %s", "scanning it again")
        # a chunk whose digests were lost keeps its scan (the quantiser's inputs); its digests are scanned again
        self.chunks = {
            k: good.get(k) or {f: v for f, v in e.items() if f not in ("file", "bytes", "sha256")}
            for k, e in chunks.items()
        }

    def _ledger(self, name: str, key) -> dict:
        entries: dict = {}
        path = self.folder / name
        if not path.is_file():
            return entries
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                e = json.loads(line)
                entries[key(e)] = e
            except (ValueError, KeyError, TypeError):  # a line cut short when the driver stopped
                continue
        return entries

    def _verified(self, entries: dict, what: str, then: str) -> dict:
        from vhmine.images import sha256_file

        good = {}
        for k, e in entries.items():
            p = self.folder / e["file"]
            if p.is_file() and p.stat().st_size == e["bytes"] and sha256_file(p) == e["sha256"]:
                good[k] = e
            else:
                log.warning(f"{what}: its file %s is missing or changed; {then}", k, p)
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
            raise write_failed(
                self.folder,
                err,
                f"the {len(self.done)} tile(s) recorded before it are kept",
                "free some space and run the same command: it resumes from them",
            ) from None

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
            entry = {
                "tile": k,
                "file": path.relative_to(self.folder).as_posix(),
                "bytes": path.stat().st_size,
                "sha256": sha256_file(path),
                **info,
            }
            self._append(LEDGER, entry)
        self.done[k] = entry
        return entry

    def rows(self, k: int) -> NpyRows:
        return NpyRows(self.tile_file(k))

    def _append(self, name: str, entry: dict) -> None:
        with open(self.folder / name, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def record_chunk(self, side: str, start: int, stop: int, info: dict, digests: np.ndarray | None = None) -> dict:
        """A scanned chunk of rows [start, stop) of one side: its digests' file atomically (when given),
        then its scan ledger line."""
        from vhmine.images import sha256_file

        entry = {"side": side, "start": int(start), "stop": int(stop), **info}
        with self._writing():
            if digests is not None:
                path = self.folder / DIGESTS / f"{side}-{start:09d}.npy"
                path.parent.mkdir(exist_ok=True)
                atomic_write(path, lambda tmp: _save_npy(tmp, np.asarray(digests, np.uint64)))
                entry.update(
                    file=path.relative_to(self.folder).as_posix(), bytes=path.stat().st_size, sha256=sha256_file(path)
                )
            self._append(SCAN, entry)
        self.chunks[(side, int(start))] = entry
        return entry

    def digests(self, side: str = "a", n: int | None = None) -> np.ndarray:
        """The recorded row digests of one side ("a": the index, "b": a rectangle's second index) in row
        order, as one uint64 array; ValueError unless the chunks with digests cover rows [0, n) (n: up
        to the last recorded chunk's end)."""
        parts = list(self.digest_parts(side, n))
        return np.concatenate(parts) if parts else np.empty(0, np.uint64)

    def digest_parts(self, side: str = "a", n: int | None = None):
        """digests() a chunk at a time (one chunk's file read when asked for: the driver never holds them all);
        the ValueError comes when the chunks run out before row n."""
        parts = sorted(
            (e["start"], e["stop"], e["file"]) for (s, _), e in self.chunks.items() if s == side and "file" in e
        )
        n = parts[-1][1] if n is None and parts else (n or 0)
        at = 0
        for start, stop, file in parts:
            if start != at or stop > n:
                break
            yield np.load(self.folder / file)
            at = stop
        if at != n:
            raise ValueError(f"{self.folder}: row digests of side {side} cover rows [0, {at}), not [0, {n})")


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
        return np.concatenate([self[int(r) : int(r) + 1] for r in rows]) if len(rows) else np.empty(0, self.dtype)


def write_npy(path: Path, dtype: np.dtype, n: int, chunks) -> None:
    """A 1-D .npy file of n rows from chunks written one after another (no array of n rows in memory)."""
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(
            f, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": (n,)}
        )
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
