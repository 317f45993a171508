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

The file is trusted only where it provably still describes the rows: a chunk's stored digests are used when
that chunk's bytes now have the stored check (hashed here at memory speed on every use); any chunk that
differs (a bit changed, rows added, removed or moved) and rows past the file are digested again, so the
digests returned are always those of the rows as they are now. That makes the file safe with no lock: a
concurrent `vhmine embed` that rewrites the vectors leaves a file that no longer checks, never a wrong one
taken as right. A run writes the file when it had to digest any chunk (an index from before this file,
or a grown one), and not while an embed holds the index's job lock (its vectors are about to change);
a folder it may not write into is only read. Why XXH3 for the checks and not the digest: docs/mine.md.
"""

from __future__ import annotations

import logging
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
    so `workers` threads hash chunks of rows side by side."""
    import hashlib

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

    starts = range(0, n, _DIGEST_ROWS)
    if len(starts) < 2 or not workers or workers <= 1:  # one chunk (or one thread): no pool to share it
        for s in starts:
            chunk(s)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(workers, len(starts))) as pool:
            list(pool.map(chunk, starts))
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
    return got


def stored_digests(folder, clip: np.ndarray, dino: np.ndarray, kind: str, digest, stats: dict | None = None):
    """The digest of every row of (clip, dino), the vectors of the index at `folder`: `digest(clip, dino)`
    (its per-row function, of `kind`) for the chunks the stored file does not vouch for, the stored digests
    for the rest; the file is written again when any chunk was digested. stats (when given) gets
    rows_digested and rows_stored."""
    folder = Path(folder)
    n = len(clip)
    if len(dino) != n:
        raise ValueError(f"clip has {n} rows, dino {len(dino)}")
    dims = (clip.shape[1], dino.shape[1])
    checks = chunk_checks(clip, dino, CHUNK_ROWS)
    had = _read(folder / ROW_DIGESTS, kind, dims)
    out, digested = checked_digests(clip, dino, checks, had and (had["digests"], had["checks"]), digest)
    if stats is not None:
        stats.update(rows_digested=digested, rows_stored=n - digested)
    if digested or (had is not None and len(had["digests"]) != n):
        store_streamed(folder, kind, dims, n, [out], [checks])  # (whole: one part each)
    return out


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


def store_streamed(folder, kind: str, dims, n: int, digest_parts, check_parts) -> None:
    """row_digests.npz (the file `stored_digests` reads, as np.savez writes it) from two streams in row order: the
    digests of n rows and their chunks' checks, each cut anywhere; holds one part at a time (a Ray run's
    driver writes it from the scan's chunks). Not written while an embed holds the index, nor where it may not
    be (as stored_digests)."""
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

    try:
        atomic_write(folder / ROW_DIGESTS, write)
    except OSError as err:
        log.info("could not keep the row digests in %s (%s)", folder, err)
