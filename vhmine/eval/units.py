"""The units each figure counts, with each unit's values: what its interval and its paired comparisons resample.

Reads Scored rows and the benchmark's items (vhmine.eval.metrics); writes nothing. `figure_units` gives, for every
figure vhmine.eval.metrics computes (FIGURES keys), its `Units`: unit id -> the values a statistic takes, chosen so
that the statistic on all units IS the figure (tests/eval/test_units.py holds every figure to metrics' own value):

- item rates (accuracy, yes ratio, HallusionBench's aAcc; precision, recall and HallusionBench's false-positive
  ratio, rates over the items said yes / truly yes / answered wrong): per item, `mean` of 0/1 or a `ratio` of 0/1
  sums; `rate` is set: Wilson's interval, "wilson";
- the truth yes ratio: per item, 0/1, but the benchmark's own (`own`): no interval, no comparison;
- F1 (2 TP / (said yes + truth yes)): a `ratio` over items, bootstrapped;
- HallusionBench's yes-percentage difference: per item (said yes, truth yes), the `difference` of their means;
- pair and image accuracy, G-Acc, qAcc, fAcc: per complete pair, image, group, question pair or figure, 0/1;
- NaturalBench's Q-Acc and I-Acc count questions and images, which share their pair group's answers: per group,
  the `ratio` of its right questions (images) to its complete ones, so a bootstrap draws whole groups.

`interval` decides by the units, not by the figure's name: a share of units (`is_share`: one 0/1 value per unit,
statistic "mean": pair and image accuracy, G-Acc, qAcc, fAcc) gets Wilson's interval over its units ("wilson
over pairs"); any other figure the percentile bootstrap over its units ("bootstrap-percentile over items").
`figure_intervals` turns them into report.json's records (`n`, `ci95`, `ci_method`); `comparisons` pairs every
two models on the units both were scored on, on every figure but the benchmark's own
(vhmine.eval.intervals.compare; McNemar's p for every share: accuracy, aAcc, the yes ratio, pair and image
accuracy, G-Acc, qAcc, fAcc).
The unreadable count has no interval (`ci_method` "count"), nor has the truth yes ratio (`OWN`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations

from vhmine.eval import intervals as I
from vhmine.eval import metrics as MT

COUNT = "count"
OWN = "none (the benchmark's own)"  # a property of the benchmark, the same for every model: nothing to estimate
HB_FIGURES = ("aAcc", "qAcc", "fAcc", "yes_pct_diff", "fp_ratio")  # metrics.hallusionbench's, in its own record


@dataclass(frozen=True)
class Units:
    values: dict  # unit id -> tuple of floats, one per argument of the statistic
    statistic: str  # "mean", "ratio" (sum / sum) or "difference" (mean - mean)
    n: int  # what the figure counts: items, items said yes, pairs, questions, ...
    over: str  # the units Wilson's n counts or a bootstrap draws: items, pairs, images, pair groups, figures, ...
    rate: bool = False  # an item rate: its interval is Wilson's
    own: bool = False  # the benchmark's own property (truth yes ratio): no interval and no comparison


def _difference(a, b, axis=-1):
    return I.mean(a, axis=axis) - I.mean(b, axis=axis)


STATISTICS = {"mean": I.mean, "ratio": I.ratio, "difference": _difference}


def _complete(groups: dict, sizes: dict | None) -> dict:
    """`groups` without those holding fewer scored rows than the benchmark's items (metrics' rule for pairs)."""
    if sizes is None:
        return groups
    return {k: v for k, v in groups.items() if not (k in sizes and len(v) < sizes[k])}


def _sizes(keys) -> dict:
    out: dict = {}
    for k in keys:
        out[k] = out.get(k, 0) + 1
    return out


def _grouped(rows, key: str) -> dict:
    out: dict = {}
    for r in rows:
        k = getattr(r, key)
        if k is not None:
            out.setdefault(k, []).append(r.correct)
    return out


def _all_right(groups: dict, over: str) -> Units:
    return Units({k: (float(all(v)),) for k, v in groups.items()}, "mean", len(groups), over)


def _items(rows, f, rate=True, statistic="mean", n=None) -> Units:
    vals = {r.id: tuple(float(x) for x in f(r)) for r in rows}
    return Units(vals, statistic, len(vals) if n is None else n, "items", rate)


def _ynq(y: Sequence) -> dict[str, Units]:
    said_yes = lambda r: r.said is True and r.truth is not None  # noqa: E731  (metrics' tp + fp)
    tp = lambda r: r.said is True and bool(r.truth)  # noqa: E731
    out = {
        "precision": _items(y, lambda r: (tp(r), said_yes(r)), statistic="ratio", n=sum(said_yes(r) for r in y)),
        "recall": _items(y, lambda r: (tp(r), bool(r.truth)), statistic="ratio", n=sum(bool(r.truth) for r in y)),
        "f1": _items(y, lambda r: (2 * tp(r), said_yes(r) + bool(r.truth)), rate=False, statistic="ratio"),
        "yes_ratio": _items(y, lambda r: (said_yes(r),)),
        "truth_yes_ratio": replace(_items(y, lambda r: (bool(r.truth),), rate=False), own=True),
    }
    return out


def _pair_groups(rows, expected) -> dict[str, Units]:
    """Q-Acc, I-Acc and G-Acc as metrics.pair_groups counts them, questions and images drawn with their group."""
    sizes, want = None, None
    if expected is not None:
        grouped = [it for it in expected if it.group_id is not None]
        sizes = MT.sizes_of(grouped, "group_id")
        want = {"q": {}, "i": {}}
        for it in grouped:
            for part, k in (("q", it.pair_id or it.id), ("i", it.image_id or it.id)):
                want[part][(it.group_id, k)] = want[part].get((it.group_id, k), 0) + 1
    groups: dict = {}
    found: dict = {"q": {}, "i": {}}
    for r in rows:
        if r.group_id is None:
            continue
        groups.setdefault(r.group_id, []).append(r.correct)
        for part, k in (("q", r.pair_id or r.id), ("i", r.image_id or r.id)):
            found[part].setdefault((r.group_id, k), []).append(r.correct)
    out = {}
    for part, key in (("q", "q_acc"), ("i", "i_acc")):
        units = {u: v for u, v in found[part].items() if want is None or len(v) >= want[part].get(u, 0)}
        per_group: dict = {}
        for (g, _), v in units.items():
            right, total = per_group.get(g, (0.0, 0.0))
            per_group[g] = (right + float(all(v)), total + 1.0)
        out[key] = Units(per_group, "ratio", len(units), "pair groups")
    out["g_acc"] = _all_right(_complete(groups, sizes), "pair groups")
    return out


def figure_units(rows: Sequence, expected: Sequence | None = None) -> dict[str, Units]:
    """Units of every figure metrics.summary gives for `rows` (`expected`: the benchmark's items, as there)."""
    size = (lambda key: None) if expected is None else (lambda key: MT.sizes_of(expected, key))  # noqa: E731
    out = {"accuracy": _items(rows, lambda r: (r.correct,))}
    y = [r for r in rows if r.kind == "YNQ"]
    if y:
        out.update(_ynq(y))
    out["pair_accuracy"] = _all_right(_complete(_grouped(rows, "pair_id"), size("pair_id")), "pairs")
    out["image_accuracy"] = _all_right(_complete(_grouped(rows, "image_id"), size("image_id")), "images")
    if any(r.group_id is not None for r in rows) or any(it.group_id is not None for it in expected or ()):
        out.update(_pair_groups(rows, expected))
    return out


def hallusionbench_units(rows: Sequence, expected: Sequence | None = None) -> dict[str, Units]:
    """Units of metrics.hallusionbench's figures (rows with HallusionBench's meta)."""

    def key(meta, names):
        return "_".join(str(meta[n]) for n in names)

    def no_figure(meta):
        return meta["category"] == "VS" and str(meta["figure_id"]) == "0"

    right = {r.id: MT.hb_correct(r) for r in rows}
    pairs: dict = {}
    figs: dict = {}
    for r in rows:
        pairs.setdefault(key(r.meta, MT.HB_PAIR), []).append(right[r.id])
        if not no_figure(r.meta):
            figs.setdefault(key(r.meta, MT.HB_FIGURE), []).append(right[r.id])
    pair_sizes = fig_sizes = None
    if expected is not None:
        pair_sizes = _sizes(key(it.meta, MT.HB_PAIR) for it in expected)
        fig_sizes = _sizes(key(it.meta, MT.HB_FIGURE) for it in expected if not no_figure(it.meta))
    return {
        "aAcc": _items(rows, lambda r: (right[r.id],)),
        "qAcc": _all_right(_complete(pairs, pair_sizes), "question pairs"),
        "fAcc": _all_right(_complete(figs, fig_sizes), "figures"),
        "yes_pct_diff": _items(rows, lambda r: (r.said is True, bool(r.truth)), rate=False, statistic="difference"),
        "fp_ratio": _items(
            rows,
            lambda r: (r.said is True and not right[r.id], not right[r.id]),
            rate=True,  # a share of the wrong items, as precision is of the items said yes: Wilson's
            statistic="ratio",
            n=sum(not v for v in right.values()),
        ),
    }


def arrays_of(units: Units, ids: Sequence) -> tuple:
    """The units' values as arrays, one per argument of the statistic, units in the order of `ids`."""
    import numpy as np

    width = len(next(iter(units.values.values()))) if units.values else 1
    return tuple(np.array([units.values[u][j] for u in ids], dtype=float) for j in range(width))


def is_share(units: Units) -> bool:
    """A share of units: each unit holds one 0/1 value and the figure is their mean (a pair right or not)."""
    return units.statistic == "mean" and all(len(v) == 1 and v[0] in (0.0, 1.0) for v in units.values.values())


def interval(units: Units, resamples: int = I.RESAMPLES, seed: int = I.SEED) -> I.Interval:
    """The figure's interval: none for the benchmark's own; Wilson's for an item rate or a share of units (over
    the units: a percentile bootstrap cannot reach past what they hold, [0, 0] at 0 of 18); else the percentile
    bootstrap over its units."""
    if units.own:  # the figure as it is, no bounds
        est = float(STATISTICS[units.statistic](*arrays_of(units, list(units.values)))) if units.values else None
        return I.Interval(est, None, None, units.n, OWN)
    if units.rate:
        num, *den = arrays_of(units, list(units.values))
        total = int(den[0].sum()) if den else len(num)
        return I.wilson(int(num.sum()), total)
    if is_share(units):
        iv = I.wilson(int(sum(v[0] for v in units.values.values())), len(units.values))
        return replace(iv, method=f"{I.WILSON} over {units.over}")
    iv = I.bootstrap(arrays_of(units, list(units.values)), STATISTICS[units.statistic], resamples, seed)
    return I.Interval(iv.estimate, iv.lo, iv.hi, units.n, f"{I.BOOTSTRAP} over {units.over}", iv.level, iv.undefined)


def figure_intervals(
    units: dict[str, Units],
    counts: Sequence[str] = ("unreadable",),
    n_items: int = 0,
    resamples: int = I.RESAMPLES,
    seed: int = I.SEED,
) -> dict[str, dict]:
    """report.json's `intervals` of one summary: figure key -> {"n", "ci95", "ci_method"} (`counts`: figures that
    are counts, given no interval; `n_items` their n)."""
    out = {k: interval(u, resamples, seed).record() for k, u in units.items()}
    out.update({k: {"n": n_items, "ci95": None, "ci_method": COUNT} for k in counts})
    return out


def comparisons(
    per_model: dict[str, dict[str, Units]], mode: str | None = None, resamples: int = I.RESAMPLES, seed: int = I.SEED
) -> list[dict]:
    """Every two models (in the given order) on every figure both have, over the units both were scored on:
    report.json's `comparisons` records, each with its `mode` (None: the whole benchmark)."""
    out = []
    for a, b in combinations(per_model, 2):
        for key in MT.FIGURES:
            ua, ub = per_model[a].get(key), per_model[b].get(key)
            if ua is None or ub is None or ua.own:  # the benchmark's own: two models differ only in what was scored
                continue
            ids = [u for u in ua.values if u in ub.values]  # a's order: the benchmark's
            if not ids:  # no unit both were scored on (no complete pair in this mode): nothing to compare
                continue
            c = I.compare(
                a,
                b,
                key,
                arrays_of(ua, ids),
                arrays_of(ub, ids),
                STATISTICS[ua.statistic],
                # a share (0/1 per unit) for both: paired right/wrong outcomes, McNemar's exact test applies
                binary=is_share(ua) and is_share(ub),
                resamples=resamples,
                seed=seed,
            )
            out.append({**c.record(), "mode": mode})
    return out


def attach_intervals(
    entry: dict,
    rows: Sequence,
    modes: Sequence[str],
    expected: Sequence | None,
    hallusionbench: bool = False,
    resamples: int = I.RESAMPLES,
    seed: int = I.SEED,
) -> dict:
    """Add `intervals` (figure key -> {"n", "ci95", "ci_method"}) beside the figures of every summary in one model's
    report.json entry: `metrics.overall`, each of `metrics.modes`, each of `metrics.kinds` and `hallusionbench`
    (the entry vhmine.eval.job builds from metrics.by_mode and metrics.hallusionbench over `rows`). Returns the
    units by scope (None: the whole benchmark; else a mode), for `report_comparisons`."""

    def of(mode):
        return None if expected is None else [it for it in expected if it.mode == mode]

    met = entry["metrics"]
    scopes: dict = {None: figure_units(rows, expected)}
    for mode in modes:
        if mode in met["modes"]:
            scopes[mode] = figure_units([r for r in rows if r.mode == mode], of(mode))
    hb = hallusionbench and entry.get("hallusionbench") is not None
    if hb:
        scopes[None].update(hallusionbench_units(rows, expected))
    for scope, units in scopes.items():
        summary = met["overall"] if scope is None else met["modes"][scope]
        # only the figures the summary holds (no yes/no figures where eval reads no yes/no, as under --rule mmvp)
        shown = summary_figures(summary) | (set(HB_FIGURES) if scope is None and hb else set())
        scopes[scope] = units = {k: u for k, u in units.items() if k in shown}
        counts = [k for k in ("unreadable",) if k in summary]
        records = figure_intervals(units, counts, summary["n"], resamples, seed)
        summary["intervals"] = {k: v for k, v in records.items() if k not in HB_FIGURES}
        if scope is None and hb:
            entry["hallusionbench"]["intervals"] = {k: records[k] for k in HB_FIGURES}
    for acc in met.get("kinds", {}).values():
        acc["intervals"] = {"accuracy": I.wilson(acc["correct"], acc["n"]).record()}
    return scopes


def summary_figures(summary: dict) -> set[str]:
    """The figure keys (metrics.FIGURES) a metrics.summary holds, its pair groups' Q-/I-/G-Acc included."""
    groups = {k for k in (summary.get("pair_groups") or {}) if k in ("q_acc", "i_acc", "g_acc")}
    return {k for k in summary if k in MT.FIGURES} | groups


def report_comparisons(
    scopes_by_model: dict[str, dict], modes: Sequence[str], resamples: int = I.RESAMPLES, seed: int = I.SEED
) -> list[dict]:
    """report.json's `comparisons`: every two models, on the whole benchmark and then each mode (in `modes` order),
    every figure both have (`scopes_by_model`: model -> what attach_intervals returned)."""
    out = []
    for scope in [None, *modes]:
        per = {m: s[scope] for m, s in scopes_by_model.items() if scope in s}
        if len(per) > 1:
            out += comparisons(per, scope, resamples, seed)
    return out
