"""Inter-rater agreement: Cohen's kappa (two raters) and Fleiss' kappa (any number).

Reads and writes nothing: pure functions over nominal labels (any hashable values). Both return
NaN when chance agreement is 1 (every rating in one category), where kappa is undefined.
`vhmine.curate.people.mode_agreement` (curate.people.agreement) applies them per mode to the store's reviews and
response labels.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters' labels on the same items (a[i] and b[i] rate item i)."""
    if len(a) != len(b):
        raise ValueError(
            f"cohen_kappa: the raters labelled {len(a)} and {len(b)} items; they must label the same items"
        )
    n = len(a)
    if n == 0:
        return math.nan
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in ca) / (n * n)
    return math.nan if pe == 1 else (po - pe) / (1 - pe)


def fleiss_kappa(items: Sequence[Sequence[Hashable]]) -> float:
    """Fleiss' kappa; `items[i]` holds the labels item i received (at least two each).

    With the same number of ratings per item this is Fleiss (1971). Items with different numbers of
    ratings use the usual extension: each item's agreement P_i = sum_j n_ij (n_ij - 1) / (n_i (n_i - 1)),
    averaged over items, and category shares p_j taken over all ratings.
    """
    rows = [Counter(labels) for labels in items]
    if not rows:
        return math.nan
    short = [i for i, r in enumerate(rows) if sum(r.values()) < 2]
    if short:
        raise ValueError(f"fleiss_kappa: item {short[0]} has fewer than two ratings")
    total = Counter()
    for r in rows:
        total.update(r)
    n_all = sum(total.values())
    p_bar = sum(sum(c * (c - 1) for c in r.values()) / (sum(r.values()) * (sum(r.values()) - 1)) for r in rows) / len(
        rows
    )
    pe = sum((c / n_all) ** 2 for c in total.values())
    return math.nan if pe == 1 else (p_bar - pe) / (1 - pe)
