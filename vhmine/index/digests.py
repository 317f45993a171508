"""Each row's digest (row_digests), and the digests kept with the index, so a grown index's old rows are not
hashed again by every run that needs their digests (vhmine.mine: a grown index's run proves its kept rows
unchanged by them). `vhmine embed` keeps them as it writes the index; a run keeps them for an index from
before that.

The digest is BLAKE2b (8 bytes, as a uint64) of the row's CLIP float32 bytes followed by its DINOv2 ones:
a real hash of the row's bits, so no change of any set of bits cancels out (the earlier digest, a linear
sum of two float32 words a 64-bit word, let sign flips in two odd-indexed components cancel). DIGEST names
this kind; mine.state records it beside the digests, and a run that kept another kind is not reused.

Reads and writes `indexes/<name>/row_digests.npz` (ROW_DIGESTS), one file, written whole by
temp-file-and-rename (files.atomic_write), never half:

    kind        the per-row digest's kind (the caller's: DIGEST)
    check       the kind of the chunk checks (CHECK)
    chunk_rows  rows per chunk (CHUNK_ROWS when written)
    dims        the CLIP and DINOv2 widths the digests were taken at
    digests     uint64, one per row of the index, in row order
    checks      uint8 (chunks, 16): XXH3-128 of each chunk's CLIP float32 bytes followed by its DINOv2 ones

    files       (optional) int64 (2, 5): the states of clip.faiss and dino.faiss (device, inode, size,
                mtime_ns, ctime_ns) whose bytes the checks were last compared with (FileStates)

The file is trusted only where it provably still describes the rows: a chunk's stored digests are used when
that chunk's bytes now have the stored check (hashed here at memory speed); any chunk that differs (a bit
changed, rows added, removed or moved) and rows past the file are digested again, so the digests returned
are always those of the rows as they are now. That makes the file safe with no lock: a concurrent `vhmine
embed` that rewrites the vectors leaves a file that no longer checks, never a wrong one taken as right. A run
writes the file when it had to digest any chunk (an index from before this file, or a grown one), and not
while an embed holds the index's job lock (its vectors are about to change); a folder it may not write into
is only read. Why XXH3 for the checks and not the digest: docs/mine.md.

The bytes are not hashed again while the vector files provably have not changed since they were: `files`
records their states once their bytes matched every check and their ctimes were settled (older than the
clock when the states were taken by more than a tick of the filesystem's clock), and a reader whose files
had those states before it read their rows, and still have them after, takes the stored digests with no
check. Every write to a file (its bytes through write or a memory map, a rename over it, even a `touch -r`
that puts its mtime back) sets its ctime to the clock's now, which a settled ctime is not: such a file
no longer has its recorded states and is checked as above. `keep_for_files` (what `vhmine embed` calls)
waits for its new files to settle, checks them once and records them.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

log = logging.getLogger("vhmine.index")

DIGEST = "blake2b-64"  # the kind of digest row_digests gives (mine.state records it in rows.parquet)
_DIGEST_ROWS = 8192  # rows hashed at a time (one thread's share)
_PERSON = b"vhmine-row"  # BLAKE2b's personalisation: these digests are of no other kind of bytes


def row_digests(clip: np.ndarray, dino: np.ndarray, workers=None) -> np.ndarray:
    """A uint64 digest of each row's float32 bits, CLIP's then DINOv2's: BLAKE2b with an 8-byte digest
    (little-endian). Equal rows give equal digests on any machine; rows that differ in any bits get equal
    digests with a chance of about 2^-64. hashlib releases the GIL while it hashes a row of 2 KiB or more,
    so `workers` threads (config.in_threads) hash chunks of rows side by side."""
    import hashlib

    from vhmine.config import in_threads

    clip, dino = np.ascontiguousarray(clip, np.float32), np.ascontiguousarray(dino, np.float32)
    if len(clip) != len(dino):
        raise ValueError(f"clip has {len(clip)} rows, dino {len(dino)}")
    n = len(clip)
    out = bytearray(8 * n)
    cb, db = clip.shape[1] * 4 if clip.ndim == 2 else 0, dino.shape[1] * 4 if dino.ndim == 2 else 0
    cm, dm = memoryview(clip.reshape(-1)).cast("B"), memoryview(dino.reshape(-1)).cast("B")
    blake = hashlib.blake2b

    def chunk(s: int) -> None:
        for r in range(s, min(s + _DIGEST_ROWS, n)):
            h = blake(cm[r * cb : (r + 1) * cb], digest_size=8, person=_PERSON)
            h.update(dm[r * db : (r + 1) * db])
            out[8 * r : 8 * r + 8] = h.digest()

    in_threads(chunk, range(0, n, _DIGEST_ROWS), workers)
    return np.frombuffer(bytes(out), "<u8").astype(np.uint64)


ROW_DIGESTS = "row_digests.npz"
CHECK = "xxh3-128"  # the chunk checks' kind
CHUNK_ROWS = 4096  # rows one check covers: a grown index digests its last old chunk and its new rows again


def chunk_checks(clip: np.ndarray, dino: np.ndarray, chunk_rows: int) -> np.ndarray:
    """XXH3-128 of each chunk of `chunk_rows` rows' bytes, CLIP's then DINOv2's: (chunks, 16) uint8."""
    import xxhash

    clip, dino = np.ascontiguousarray(clip, np.float32), np.ascontiguousarray(dino, np.float32)
    n = len(clip)
    out = np.zeros((-(-n // chunk_rows), 16), np.uint8)
    for k, s in enumerate(range(0, n, chunk_rows)):
        h = xxhash.xxh3_128(memoryview(clip[s : s + chunk_rows]).cast("B"))
        h.update(memoryview(dino[s : s + chunk_rows]).cast("B"))
        out[k] = np.frombuffer(h.digest(), np.uint8)
    return out


def _read(path: Path, kind: str, dims: tuple[int, int]) -> dict | None:
    """The stored file's arrays, or None when there is none, it is unreadable or of another kind or shape."""
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as z:
            got = {k: z[k] for k in ("kind", "check", "chunk_rows", "dims", "digests", "checks")}
            files = z["files"] if "files" in z.files else None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:  # (a member's CRC-32 is checked too)
        if path.exists():
            log.info("%s is unreadable (%s): digesting every row again", path, type(err).__name__)
        return None
    if str(got["kind"]) != kind or str(got["check"]) != CHECK or tuple(got["dims"].tolist()) != tuple(dims):
        return None
    if int(got["chunk_rows"]) != CHUNK_ROWS or got["checks"].shape[1:] != (16,):
        return None
    if len(got["checks"]) != -(-len(got["digests"]) // CHUNK_ROWS):
        return None
    got["files"] = files if files is not None and files.shape == (2, 5) and files.dtype == np.int64 else None
    return got


def stored_digests(folder, clip, dino, kind: str, digest, stats: dict | None = None, seen=None):
    """The digest of every row of (clip, dino), the vectors of the index at `folder`: `digest(clip, dino)`
    (its per-row function, of `kind`) for the chunks the stored file does not vouch for, the stored digests
    for the rest; the file is written again when any chunk was digested, or to record the files' states.
    seen: the vector files' FileStates taken before these rows were read from them (file_states), or None
    (rows from elsewhere: every chunk checked). stats (when given) gets rows_digested, rows_stored and
    rows_checked (0 where the files' states vouched for every row)."""
    folder = Path(folder)
    n = len(clip)
    if len(dino) != n:
        raise ValueError(f"clip has {n} rows, dino {len(dino)}")
    dims = (clip.shape[1], dino.shape[1])
    had = _read(folder / ROW_DIGESTS, kind, dims)
    if had is not None and len(had["digests"]) == n and seen is not None and seen.vouched_by(had.get("files")):
        if seen.unchanged(folder):  # (and none was written while the rows were read)
            if stats is not None:
                stats.update(rows_digested=0, rows_stored=n, rows_checked=0)
            return had["digests"]
    checks = chunk_checks(clip, dino, CHUNK_ROWS)
    out, digested = checked_digests(clip, dino, checks, had and (had["digests"], had["checks"]), digest)
    if stats is not None:
        stats.update(rows_digested=digested, rows_stored=n - digested, rows_checked=n)
    files = seen.states if seen is not None and seen.settled() and seen.unchanged(folder) else None
    recorded = had is not None and files is not None and seen.vouched_by(had.get("files"))
    if digested or (had is not None and len(had["digests"]) != n) or (files is not None and not recorded):
        store_streamed(folder, kind, dims, n, [out], [checks], files=files)  # (whole: one part each)
    return out


_SETTLE_NS = 20_000_000  # a filesystem with sub-second timestamps: its clock ticks at least this often (Linux: 1-10 ms)
_SETTLE_WHOLE_NS = 2_000_000_000  # one whose timestamps are whole seconds (ext3, HFS+; FAT's are 2 s)


@dataclass(frozen=True)
class FileStates:
    """The index's vector files' states, (device, inode, size, mtime_ns, ctime_ns) a file (`states`, int64
    (2, 5)), and the clock just before they were taken (`taken_ns`)."""

    taken_ns: int
    states: np.ndarray

    def wait_ns(self) -> int:
        """Nanoseconds still to wait, from when the states were taken, until they would be settled (<= 0: they are)."""
        ctime = self.states[:, 4]
        margin = np.where(ctime % 10**9 == 0, _SETTLE_WHOLE_NS, _SETTLE_NS)
        return int((ctime + margin - self.taken_ns).max())

    def settled(self) -> bool:
        """Whether any write after these states were taken gives its file another ctime: each file's ctime was
        older than the clock by more than a tick of its filesystem's clock."""
        return self.wait_ns() <= 0

    def unchanged(self, folder) -> bool:
        """Whether the files have these states now."""
        now = file_states(folder)
        return now is not None and np.array_equal(now.states, self.states)

    def vouched_by(self, recorded) -> bool:
        """Whether the kept file recorded these states (its `files`, or None)."""
        return recorded is not None and np.array_equal(recorded, self.states)


def file_states(folder) -> FileStates | None:
    """The states of the vector files of the index at `folder` now, or None where one cannot be read."""
    import time

    from vhmine.index.layout import VECTOR_FILES

    taken = time.time_ns()
    try:
        found = [os.stat(Path(folder) / name) for name in VECTOR_FILES.values()]
    except OSError:
        return None
    as_int64 = [[s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns] for s in found]
    return FileStates(taken, np.array([[v - 2**64 if v >= 2**63 else v for v in r] for r in as_int64], np.int64))


def keep_for_files(folder, kind: str, digest) -> np.ndarray:
    """stored_digests of the index's vector files as they are on disk (mapped, not loaded), with their states:
    once their ctimes have settled (a few milliseconds after they were written; 2 s on a filesystem of whole
    seconds), so the next reader that finds them so takes the digests with no check."""
    import time

    from vhmine.index.layout import VECTOR_FILES
    from vhmine.index.rows import open_vectors

    folder = Path(folder)
    seen = file_states(folder)
    if seen is not None and seen.wait_ns() > 0:
        time.sleep(seen.wait_ns() / 1e9)
        seen = file_states(folder)
    rows = []
    for name in VECTOR_FILES.values():
        v = open_vectors(folder / name)
        empty = np.zeros((0, v.dim), np.float32)
        rows.append(np.memmap(v.location, np.float32, "r", v.offset, (v.rows, v.dim)) if v.rows else empty)
    return stored_digests(folder, *rows, kind, digest, seen=seen)


def checked_digests(clip, dino, checks, had, digest) -> tuple[np.ndarray, int]:
    """(the digest of each row, how many were digested): the stored ones of each chunk whose check `had`
    (stored digests and checks of these rows' chunks, from their first: None, or fewer, where none) equals its
    check now, `digest(clip, dino)` of the others."""
    n = len(clip)
    out = np.zeros(n, np.uint64)
    same = np.zeros(len(checks), bool)
    if had is not None:
        k = min(len(had[1]), len(checks))
        # a stored chunk of fewer rows (the index's last, before it grew) hashed other bytes: it differs
        same[:k] = (had[1][:k] == checks[:k]).all(axis=1)
        for c in np.flatnonzero(same):
            out[c * CHUNK_ROWS : (c + 1) * CHUNK_ROWS] = had[0][c * CHUNK_ROWS : (c + 1) * CHUNK_ROWS]
    digested = 0
    for lo, hi in _runs(np.flatnonzero(~same)):  # runs of adjacent chunks digested in one call (its threads share them)
        a, b = lo * CHUNK_ROWS, min(hi * CHUNK_ROWS, n)
        out[a:b] = digest(clip[a:b], dino[a:b])
        digested += b - a
    return out, digested


def _runs(chunks: np.ndarray):
    """Runs of consecutive chunk numbers as (first, past the last)."""
    if not len(chunks):
        return []
    cut = np.flatnonzero(np.diff(chunks) != 1) + 1
    return [(int(r[0]), int(r[-1]) + 1) for r in np.split(chunks, cut)]


def kept_location(rows) -> str:
    """Where an index's rows (index.rows.IndexRows, as a task reads them: a path or a URL) keep their digests:
    ROW_DIGESTS beside the vector files."""
    return f"{str(rows.clip.location).rsplit('/', 1)[0]}/{ROW_DIGESTS}"


def stored_range(location: str, start: int, stop: int, kind: str, dims) -> tuple[np.ndarray, np.ndarray] | None:
    """Rows [start, stop) of a kept file's digests and the checks of the chunks they fall in (start a multiple of
    CHUNK_ROWS; as many of them as the file holds), read by byte range (a local path or an fsspec URL: what a
    Ray task reads, never the whole file), or None when there is none, it is unreadable, of another kind or
    shape, or holds none of them. The caller checks each chunk against the rows' bytes before it uses its
    digests (checked_digests)."""
    import zipfile

    from vhmine.index.rows import open_location

    try:
        f = open_location(location)
    except OSError:
        return None
    try:
        with f, zipfile.ZipFile(f) as z:
            small = {k: _member(z, k) for k in ("kind", "check", "chunk_rows", "dims")}
            if (str(small["kind"]), str(small["check"]), int(small["chunk_rows"])) != (kind, CHECK, CHUNK_ROWS):
                return None
            if tuple(small["dims"].tolist()) != tuple(dims):
                return None
            digests, checks = (_member_rows(z, f, k) for k in ("digests", "checks"))
            stop = min(stop, digests[1])  # (a file of fewer rows: its rows in the range)
            a, b = start // CHUNK_ROWS, min(-(-stop // CHUNK_ROWS), checks[1])
            if stop <= start or b <= a or checks[2] != (16,) or checks[1] != -(-digests[1] // CHUNK_ROWS):
                return None
            return _rows_of(f, digests, start, stop), _rows_of(f, checks, a, b).reshape(b - a, 16)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):
        return None


def _member(z, name: str) -> np.ndarray:
    import io

    return np.load(io.BytesIO(z.read(f"{name}.npy")), allow_pickle=False)


def _member_rows(z, f, name: str):
    """(where the member's array data starts in the file, its rows, the shape of a row, its dtype): a stored
    (uncompressed) member, as np.savez writes them."""
    import struct
    import zipfile

    info = z.getinfo(f"{name}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        raise ValueError(f"{name}.npy is compressed")
    f.seek(info.header_offset)
    head = f.read(30)
    if head[:4] != b"PK\x03\x04":
        raise ValueError("not a local file header")
    f.seek(info.header_offset + 30 + sum(struct.unpack("<HH", head[26:30])))
    version = np.lib.format.read_magic(f)
    read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}[version]
    shape, fortran, dtype = read(f)
    if fortran or not shape:
        raise ValueError(f"{name}.npy is not rows")
    return f.tell(), int(shape[0]), tuple(shape[1:]), dtype


def _rows_of(f, member, start: int, stop: int) -> np.ndarray:
    at, _, row, dtype = member
    width = dtype.itemsize * int(np.prod(row, dtype=np.int64))
    f.seek(at + start * width)
    return np.frombuffer(f.read((stop - start) * width), dtype)


def store_streamed(folder, kind: str, dims, n: int, digest_parts, check_parts, files=None) -> None:
    """row_digests.npz (the file `stored_digests` reads, as np.savez writes it) from two streams in row order: the
    digests of n rows and their chunks' checks, each cut anywhere; holds one part at a time (a Ray run's
    driver writes it from the scan's chunks). Not written while an embed holds the index, nor where it may not
    be (as stored_digests). files: the vector files' states to record (FileStates.states), or None."""
    import zipfile

    from vhmine.files import atomic_write
    from vhmine.index.layout import embed_running

    folder = Path(folder)
    if embed_running(folder) is not None:
        return
    chunks = -(-n // CHUNK_ROWS)

    def member(z, name: str, dtype, shape, parts=None, value=None) -> None:
        with z.open(f"{name}.npy", "w", force_zip64=True) as m:
            if value is not None:
                np.lib.format.write_array(m, value, allow_pickle=False)
                return
            head = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
            np.lib.format.write_array_header_1_0(m, head)
            rows = 0
            for p in parts:
                p = np.ascontiguousarray(p, dtype)
                m.write(p.tobytes())
                rows += len(p)
            if rows != shape[0]:
                raise ValueError(f"{name}: {rows} rows written, {shape[0]} announced")

    def write(tmp: Path) -> None:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
            member(z, "kind", None, None, value=np.array(kind))
            member(z, "check", None, None, value=np.array(CHECK))
            member(z, "chunk_rows", None, None, value=np.array(CHUNK_ROWS))
            member(z, "dims", None, None, value=np.array(dims, np.int64))
            member(z, "digests", np.uint64, (n,), digest_parts)
            member(z, "checks", np.uint8, (chunks, 16), (np.asarray(c, np.uint8).reshape(-1, 16) for c in check_parts))
            if files is not None:
                member(z, "files", None, None, value=np.asarray(files, np.int64))

    try:
        atomic_write(folder / ROW_DIGESTS, write)
    except OSError as err:
        log.info("could not keep the row digests in %s (%s)", folder, err)
