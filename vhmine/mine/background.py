"""The scatter plot's background: the similarities of random pairs of the run's rows (every pair of a small
collection), with the miner's own float64 bits (mine.join.pair_sims), so the plot shows where most pairs lie
and mine.relax can count pairs at lower thresholds. Reads the rows it is handed (arrays, or a Ray run's vector
files batch by batch); writes nothing.
"""

from __future__ import annotations

BACKGROUND_PAIRS = 20_000  # the scatter plot's background: every pair up to this many, else a sample of this size


def background_sample(n: int, sims, *, seed: int = 0, size: int = 20_000, across: int | None = None):
    """Similarities of random pairs (all of them when few), so the plot shows where most pairs lie;
    sims(i, j) -> (clip sims, dino sims) of those rows. across: the pairs are (row i of n, row j of another
    `across` rows), not pairs of the n rows."""
    import numpy as np

    if across is not None:
        if n * across <= size:
            i, j = (a.ravel() for a in np.meshgrid(np.arange(n), np.arange(across), indexing="ij"))
        else:
            rng = np.random.default_rng(seed)
            i, j = rng.integers(0, n, size), rng.integers(0, across, size)
        return sims(i, j)
    if n * (n - 1) // 2 <= size:  # small collection: every pair
        i, j = np.triu_indices(n, 1)
    else:
        rng = np.random.default_rng(seed)
        i, j = rng.integers(0, n, size), rng.integers(0, n, size)
        i, j = i[i != j], j[i != j]
    return sims(i, j)


def cross_sims(take_x, take_y, i, j, step: int = 4096):
    """mine.join.pair_sims of row i of one collection and row j of another (the miner's float64 bits), rows
    fetched a batch at a time by take_x(rows) / take_y(rows) (sorted unique row numbers -> float32 rows)."""
    import numpy as np

    from vhmine.mine.join import pair_sims

    out = np.empty(len(i))
    for s in range(0, len(i), step):
        a, b = i[s : s + step], j[s : s + step]
        ua, ub = np.unique(a), np.unique(b)
        out[s : s + step] = pair_sims(
            np.concatenate([take_x(ua), take_y(ub)]), np.searchsorted(ua, a), len(ua) + np.searchsorted(ub, b)
        )
    return out


def file_sims(vf, i, j, step: int = 4096):
    """pair_sims of rows i, j of one vector file (vhmine.index rows: vf.take(rows)), fetched a batch at a time."""
    import numpy as np

    from vhmine.mine.join import pair_sims

    out = np.empty(len(i))
    for s in range(0, len(i), step):
        a, b = i[s : s + step], j[s : s + step]
        uniq = np.unique(np.concatenate([a, b]))
        out[s : s + step] = pair_sims(vf.take(uniq), np.searchsorted(uniq, a), np.searchsorted(uniq, b))
    return out


def array_sims(clip, dino, i, j):
    """(clip sims, dino sims) of rows i, j of one collection's arrays (pair_sims: the miner's float64 bits)."""
    from vhmine.mine.join import pair_sims

    return pair_sims(clip, i, j), pair_sims(dino, i, j)


def across_sims(a, b, ids_a, ids_b, shared: bool, i, j):
    """(clip sims, dino sims) of row i of index a and row j of index b (opened whole), only the rectangle's pairs
    as the run counts them when the two share images (mine.join.keep_across)."""
    if shared:
        from vhmine.mine.join import keep_across

        kept = keep_across(ids_a[i], ids_b[j])
        i, j = i[kept], j[kept]
    return (
        cross_sims(a.clip.__getitem__, b.clip.__getitem__, i, j),
        cross_sims(a.dino.__getitem__, b.dino.__getitem__, i, j),
    )
