"""A digest of each row of an index's vectors: what tells a grown index's kept rows from changed ones
(vhmine.mine.grow compares a run's digests with the index's now). Reads and writes nothing.
"""

from __future__ import annotations

import functools

import numpy as np

from vhmine.mine.join.quantise import in_threads

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
    rows' words (two float32 bits a word) times fixed odd random multipliers. Equal rows give equal digests on any
    machine (integer arithmetic); a row that differs in one word always gets another digest, in several words
    with a chance of about 2^-64 of the same. Linear, so it runs at memory speed (a cryptographic hash
    of every row would cost more than mining the new rows of a grown index). workers: see
    quantise.in_threads."""
    clip, dino = np.ascontiguousarray(clip, np.float32), np.ascontiguousarray(dino, np.float32)
    if len(clip) != len(dino):
        raise ValueError(f"clip has {len(clip)} rows, dino {len(dino)}")
    out = np.empty(len(clip), np.uint64)

    def chunk(s: int) -> None:
        acc = np.zeros(min(_DIGEST_ROWS, len(clip) - s), np.uint64)
        for part, x in enumerate((clip, dino)):
            w = _words(x[s : s + _DIGEST_ROWS])  # (numpy's integer arithmetic wraps mod 2^64)
            acc += np.multiply(w, _multipliers(w.shape[1], part + 0x766D)).sum(axis=1)
        out[s : s + _DIGEST_ROWS] = acc

    in_threads(chunk, range(0, len(clip), _DIGEST_ROWS), workers)
    return out
