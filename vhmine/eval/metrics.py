"""Metrics over scored benchmark items, each named for what it counts.

Reads and writes nothing: pure functions over `Scored` rows (one per item: was it right, and for
yes/no questions what the model said). Unreadable answers (`said is None`) are counted as such and
as wrong, never taken as "no".

- accuracy: right / all.
- YNQ (positive = "yes"): precision = TP / said yes; recall = TP / truth yes (an unreadable answer
  to a yes-question is a miss); F1 (their harmonic mean; 0 when TP is 0); yes_ratio = said yes / all answers (the model's share of "yes",
  not the ground truth's: lmms-eval's POPE yes_ratio counts the ground truth).
- pair_accuracy (MMVP, HallusionBench qAcc): share of question pairs (same `pair_id`) with every
  question right; image_accuracy (fAcc): share of images (same `image_id`) with every question right.
- pair_groups (NaturalBench's Q-Acc, I-Acc, G-Acc over the exported pair groups, `group_id`): a
  question is right when right on both images of its group; an image when every question of its group
  is right on it; a group when every question is right on both images. `acc` is the items' accuracy
  within groups. A group missing an item (a failed request, --partial) is left out and counted.
- hallusionbench(): HallusionBench's aAcc, qAcc, fAcc, yes-percentage difference and false-positive
  ratio as its paper and utils.py define them (see that function).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional, Sequence


@dataclass(frozen=True)
class Scored:
    id: str
    mode: str
    kind: str
    correct: bool
    said: Optional[bool] = None  # YNQ: what the model answered; None: no parser could read it
    truth: Optional[bool] = None
    pair_id: Optional[str] = None
    image_id: Optional[str] = None
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    group_id: Optional[str] = None  # a pair group (vhmine.bench.assign_groups)


def _ratio(a: int, b: int) -> Optional[float]:
    return a / b if b else None


def accuracy(rows: Sequence[Scored]) -> dict:
    right = sum(r.correct for r in rows)
    return {"n": len(rows), "correct": right, "accuracy": _ratio(right, len(rows))}


def ynq(rows: Sequence[Scored]) -> dict:
    """Confusion counts with "yes" as the positive class, and the measures built on them."""
    tp = sum(1 for r in rows if r.truth and r.said is True)
    fp = sum(1 for r in rows if r.truth is False and r.said is True)
    tn = sum(1 for r in rows if r.truth is False and r.said is False)
    fn = sum(1 for r in rows if r.truth and r.said is False)
    unread = sum(1 for r in rows if r.said is None)
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, sum(1 for r in rows if r.truth))
    # F1 = 2TP / (said yes + truth yes): 0 when nothing said "yes" was right, None only when both are empty
    f1 = _ratio(2 * tp, (tp + fp) + sum(1 for r in rows if r.truth))
    return {"tp": tp, "fp": fp, "tn": tn, "fn": fn, "unreadable": unread, "precision": precision, "recall": recall,
            "f1": f1, "yes_ratio": _ratio(tp + fp, len(rows)), "truth_yes_ratio": _ratio(sum(1 for r in rows if r.truth), len(rows))}


def group_accuracy(rows: Iterable[Scored], key: str) -> dict:
    """Share of groups (rows sharing a non-empty `key`) whose every row is right."""
    groups: dict[str, list[bool]] = {}
    for r in rows:
        k = getattr(r, key)
        if k is not None:
            groups.setdefault(k, []).append(r.correct)
    right = sum(all(v) for v in groups.values())
    return {"groups": len(groups), "correct": right, "accuracy": _ratio(right, len(groups))}


def pair_groups(rows: Sequence[Scored], sizes: Optional[dict] = None) -> dict:
    """NaturalBench's measures over the pair groups (see the module docstring); `sizes`: group id -> its items
    in the benchmark, so that a group with an unscored item is left out rather than scored on what is left."""
    groups: dict[str, list[Scored]] = {}
    for r in rows:
        if r.group_id is not None:
            groups.setdefault(r.group_id, []).append(r)
    incomplete = sorted(g for g, rs in groups.items() if sizes is not None and len(rs) < sizes.get(g, 0))
    for g in incomplete:
        del groups[g]
    questions: dict[tuple, list[bool]] = {}
    images: dict[tuple, list[bool]] = {}
    for g, rs in groups.items():
        for r in rs:
            questions.setdefault((g, r.pair_id or r.id), []).append(r.correct)
            images.setdefault((g, r.image_id or r.id), []).append(r.correct)
    items = [r.correct for rs in groups.values() for r in rs]
    return {"groups": len(groups), "questions": len(questions), "images": len(images), "items": len(items),
            "incomplete": len(incomplete),
            "q_acc": _ratio(sum(all(v) for v in questions.values()), len(questions)),
            "i_acc": _ratio(sum(all(v) for v in images.values()), len(images)),
            "g_acc": _ratio(sum(all(r.correct for r in rs) for rs in groups.values()), len(groups)),
            "acc": _ratio(sum(items), len(items))}


def summary(rows: Sequence[Scored], group_sizes: Optional[dict] = None) -> dict:
    """accuracy (and YNQ measures when there are YNQ rows), pair and image accuracy, and the pair groups'
    measures (`pair_groups`) when any row is in a group."""
    out = accuracy(rows)
    y = [r for r in rows if r.kind == "YNQ"]
    if y:
        out.update(ynq(y))
    pairs, images = group_accuracy(rows, "pair_id"), group_accuracy(rows, "image_id")
    out["pair_accuracy"], out["pairs"] = pairs["accuracy"], pairs["groups"]
    out["image_accuracy"], out["images"] = images["accuracy"], images["groups"]
    if any(r.group_id is not None for r in rows):
        out["pair_groups"] = pair_groups(rows, group_sizes)
    return out


def by_mode(rows: Sequence[Scored], modes: Optional[Sequence[str]] = None, group_sizes: Optional[dict] = None) -> dict:
    """{"overall": summary, "modes": {mode: summary}} with modes in the given (or first-seen) order."""
    order = list(modes) if modes else list(dict.fromkeys(r.mode for r in rows))
    per = {m: summary([r for r in rows if r.mode == m], group_sizes) for m in order if any(r.mode == m for r in rows)}
    return {"overall": summary(rows, group_sizes), "modes": per}


# --- HallusionBench ------------------------------------------------------------------------------

def hb_correctness(r: Scored) -> int:
    """HallusionBench's per-answer code: 1 right, 0 wrong, 2 unclear (no parser could read it)."""
    if r.said is None:
        return 2
    return 1 if r.said == r.truth else 0


def hb_correct(r: Scored) -> bool:
    """Right, by HallusionBench's rule: with no image (VS, figure 0) an unclear answer counts as right."""
    c = hb_correctness(r)
    no_figure = r.meta.get("category") == "VS" and str(r.meta.get("figure_id")) == "0"
    return c in (1, 2) if no_figure else c == 1


def hallusionbench(rows: Sequence[Scored]) -> dict:
    """HallusionBench's measures (rows need its meta: category, subcategory, set_id, figure_id, question_id).

    - aAcc: right questions / all questions (`get_eval_all`);
    - qAcc: question pairs (category, subcategory, set_id, question_id) with every question right
      (`get_eval_pair_all`);
    - fAcc: figures (category, subcategory, set_id, figure_id; VS figure 0 has no figure and is left
      out) with every question right (`get_eval_fig`'s "correct" / total, as its leaderboard reports);
    - yes_pct_diff: share of "yes" answers minus share of "yes" truths, in [-1, 1] (the paper's
      Pct. Diff); fp_ratio: share of "yes" among the wrong answers (the paper's FP Ratio).
    The last two count what the model said: an unclear answer is neither yes nor no. (utils.py's
    yes_ratio_stats infers "said yes" from correctness, which counts an unclear answer to a
    no-question as "yes"; on readable answers the two agree.)
    """
    def key(r: Scored, *names: str) -> str:
        return "_".join(str(r.meta[n]) for n in names)

    right = {r.id: hb_correct(r) for r in rows}
    pairs: dict[str, list[bool]] = {}
    figs: dict[str, list[bool]] = {}
    for r in rows:
        pairs.setdefault(key(r, "category", "subcategory", "set_id", "question_id"), []).append(right[r.id])
        if not (r.meta["category"] == "VS" and str(r.meta["figure_id"]) == "0"):
            figs.setdefault(key(r, "category", "subcategory", "set_id", "figure_id"), []).append(right[r.id])
    wrong = [r for r in rows if not right[r.id]]
    said_yes = sum(1 for r in rows if r.said is True)
    return {
        "n": len(rows),
        "aAcc": _ratio(sum(right.values()), len(rows)),
        "qAcc": _ratio(sum(all(v) for v in pairs.values()), len(pairs)),
        "fAcc": _ratio(sum(all(v) for v in figs.values()), len(figs)),
        "question_pairs": len(pairs),
        "figures": len(figs),
        "yes_pct_diff": None if not rows else said_yes / len(rows) - sum(1 for r in rows if r.truth) / len(rows),
        "fp_ratio": _ratio(sum(1 for r in wrong if r.said is True), len(wrong)),
        "unclear": sum(1 for r in rows if r.said is None),
    }
