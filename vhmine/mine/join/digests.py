"""A digest of each row of an index's vectors: what tells a grown index's kept rows from changed ones
(vhmine.mine.grow compares a run's digests with the index's now). Reads and writes nothing.

The digest is BLAKE2b (8 bytes, as a uint64) of the row's CLIP float32 bytes followed by its DINOv2 ones:
a real hash of the row's bits, so no change of any set of bits cancels out (the earlier digest, a linear
sum of two float32 words a 64-bit word, let sign flips in two odd-indexed components cancel). DIGEST names
this kind; mine.state records it beside the digests, and a run that kept another kind is not reused.
"""

from __future__ import annotations

import numpy as np

from vhmine.mine.join.rowcheck import in_threads

DIGEST = "blake2b-64"  # the kind of digest row_digests gives (mine.state records it in rows.parquet)
_DIGEST_ROWS = 8192  # rows hashed at a time (one thread's share)
_PERSON = b"vhmine-row"  # BLAKE2b's personalisation: these digests are of no other kind of bytes


def row_digests(clip: np.ndarray, dino: np.ndarray, workers=None) -> np.ndarray:
    """A uint64 digest of each row's float32 bits, CLIP's then DINOv2's: BLAKE2b with an 8-byte digest
    (little-endian). Equal rows give equal digests on any machine; rows that differ in any bits get equal
    digests with a chance of about 2^-64. hashlib releases the GIL while it hashes a row of 2 KiB or more,
    so `workers` threads (rowcheck.in_threads) hash chunks of rows side by side."""
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

    if n <= _DIGEST_ROWS:  # one chunk: no threads to share it
        chunk(0)
    else:
        in_threads(chunk, range(0, n, _DIGEST_ROWS), workers)
    return np.frombuffer(bytes(out), "<u8").astype(np.uint64)
