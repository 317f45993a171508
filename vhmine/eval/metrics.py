"""Metrics over scored benchmark items, each named for what it counts.

Reads and writes nothing: pure functions over `Scored` rows (one per item: was it right, and for
yes/no questions what the model said). Unreadable answers (`said is None`) are counted as such and
as wrong, never taken as "no".

- accuracy: right / all.
- YNQ (positive = "yes"): precision = TP / said yes; recall = TP / truth yes (an unreadable answer
  to a yes-question is a miss); F1 (their harmonic mean; 0 when TP is 0); yes_ratio = said yes / all answers (the
  model's share of "yes", not the ground truth's: lmms-eval's POPE yes_ratio counts the ground truth).
- pair_accuracy (MMVP, HallusionBench qAcc): share of question pairs (same `pair_id`) with every
  question right; image_accuracy (fAcc): share of images (same `image_id`) with every question right.
  Only complete pairs and images count: given the benchmark's items (`expected`), a pair or image with
  an item that was not scored (a failed request, an answer missing under --partial) is left out and
  counted (`incomplete_pairs`, `incomplete_images`), never judged on the items that are left.
- pair_groups (NaturalBench's Q-Acc, I-Acc, G-Acc over the exported pair groups, `group_id`): a
  question is right when right on both images of its group; an image when every question of its group
  is right on it; a group when every question is right on both images. `acc` is the items' accuracy
  within groups. A group missing an item (a failed request, --partial) is left out of G-Acc and counted; a
  question or image missing one is left out of Q-Acc or I-Acc (each figure counts its own complete units).
- hallusionbench(): HallusionBench's aAcc, qAcc, fAcc, yes-percentage difference and false-positive
  ratio as its paper and utils.py define them (see that function); its question pairs and figures
  follow the same rule: only complete ones count.

FIGURES names every figure once: the key report.json uses, the label the console, report.md and report.html
print, and what it counts; UNITS the unit each is printed in; the lmms-eval export names its metrics by the same keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

# One name per figure: report.json's key -> (the label the console and report.md print, what it counts).
# The lmms-eval export names its metrics by these keys (vhmine.formats.lmms_eval).
FIGURES = {
    "accuracy": ("accuracy", "right items / scored items (VHTest's per-item accuracy)"),
    "pair_accuracy": (
        "pair accuracy",
        "question pairs (one question asked of both images of a mined pair) with every item right / complete pairs",
    ),
    "image_accuracy": ("image accuracy", "images with every question asked of them right / complete images"),
    "q_acc": ("Q-Acc", "pair-group questions right on both images / questions of complete groups (NaturalBench)"),
    "i_acc": (
        "I-Acc",
        "pair-group images with every question of their group right / images of complete groups (NaturalBench)",
    ),
    "g_acc": ("G-Acc", "pair groups with every question right on both images / complete groups (NaturalBench)"),
    "precision": ("precision", "yes/no: right yes / said yes"),
    "recall": ("recall", "yes/no: right yes / truth yes (an unreadable answer to a yes-question is a miss)"),
    "f1": ("F1", "yes/no: 2 right yes / (said yes + truth yes)"),
    "yes_ratio": ("yes ratio", "yes/no: the model's answers read as yes / its answers"),
    "truth_yes_ratio": ("truth yes ratio", "yes/no: truth-yes items / items"),
    "unreadable": ("unreadable", "yes/no answers the rule cannot read (counted wrong, never as no)"),
    "aAcc": ("aAcc", "HallusionBench: right questions / questions"),
    "qAcc": ("qAcc", "HallusionBench: question pairs with every question right / complete question pairs"),
    "fAcc": ("fAcc", "HallusionBench: figures with every question right / complete figures"),
    "yes_pct_diff": ("yes % diff", "HallusionBench: share of yes answers - share of yes truths"),
    "fp_ratio": ("FP ratio", "HallusionBench: share of yes among the wrong answers"),
}


# Each figure's unit as every report prints it: "%" a share shown in percent, "count" a number of answers,
# "share" a fraction in [0, 1] and "signed share" a difference of fractions in [-1, 1] (HallusionBench's own).
UNITS = {**{k: "%" for k in FIGURES}, "unreadable": "count", "yes_pct_diff": "signed share", "fp_ratio": "share"}


def label(key: str) -> str:
    """The printed name of the figure report.json calls `key`."""
    return FIGURES[key][0]


def unit(key: str) -> str:
    """The unit the figure report.json calls `key` is printed in (UNITS)."""
    return UNITS[key]


@dataclass(frozen=True)
class Scored:
    id: str
    mode: str
    kind: str
    correct: bool
    said: bool | None = None  # YNQ: what the model answered; None: no parser could read it
    truth: bool | None = None
    pair_id: str | None = None
    image_id: str | None = None
    meta: dict = field(default_factory=dict, compare=False, hash=False)
    group_id: str | None = None  # a pair group (vhmine.bench.assign_groups)


def _ratio(a: int, b: int) -> float | None:
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
    return {
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
        "unreadable": unread,
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "yes_ratio": _ratio(tp + fp, len(rows)),
        "truth_yes_ratio": _ratio(sum(1 for r in rows if r.truth), len(rows)),
    }


def sizes_of(items: Iterable, key: str) -> dict:
    """How many items share each non-empty `key` (pair_id, image_id, group_id): `items` are the benchmark's
    items (BenchItem) or Scored rows, anything with that attribute."""
    out: dict = {}
    for it in items:
        k = getattr(it, key)
        if k is not None:
            out[k] = out.get(k, 0) + 1
    return out


def _incomplete(groups: dict, sizes: dict | None) -> list:
    """Keys of `sizes` (the benchmark's groups) with fewer scored rows in `groups` than items, none included."""
    if sizes is None:
        return []
    return sorted(k for k, n in sizes.items() if len(groups.get(k, ())) < n)


def group_accuracy(rows: Iterable[Scored], key: str, sizes: dict | None = None) -> dict:
    """Share of groups (rows sharing a non-empty `key`) whose every row is right. `sizes`: key -> its items
    in the benchmark; a group with fewer scored rows is left out and counted as `incomplete`."""
    groups: dict[str, list[bool]] = {}
    for r in rows:
        k = getattr(r, key)
        if k is not None:
            groups.setdefault(k, []).append(r.correct)
    incomplete = _incomplete(groups, sizes)
    for k in incomplete:
        groups.pop(k, None)
    right = sum(all(v) for v in groups.values())
    return {
        "groups": len(groups),
        "correct": right,
        "accuracy": _ratio(right, len(groups)),
        "incomplete": len(incomplete),
    }


def pair_groups(rows: Sequence[Scored], sizes: dict | None = None, expected: Sequence | None = None) -> dict:
    """NaturalBench's measures over the pair groups (see the module docstring). Each counts its own complete units:
    G-Acc the groups all of whose items were scored, Q-Acc the questions scored on both images, I-Acc the images
    scored on every question of their group, acc every scored item of a group; so a wrong answer that completes a
    group never brings that group's right image or items in to raise a figure (it did: I-Acc 0.0 -> 0.25).
    `sizes`: group id -> its items in the benchmark; `expected`: the benchmark's items (BenchItems), from which
    the groups', questions' and images' sizes are taken; None: the rows are everything."""

    def unit(x, part):
        return (x.group_id, x.pair_id or x.id) if part == "q" else (x.group_id, x.image_id or x.id)

    if expected is not None:
        grouped = [it for it in expected if it.group_id is not None]
        sizes = sizes or sizes_of(grouped, "group_id")
        want = {part: {} for part in "qi"}
        for it in grouped:
            for part in "qi":
                want[part][unit(it, part)] = want[part].get(unit(it, part), 0) + 1
    else:
        want = None
    groups: dict[str, list[Scored]] = {}
    for r in rows:
        if r.group_id is not None:
            groups.setdefault(r.group_id, []).append(r)
    items = [r.correct for rs in groups.values() for r in rs]
    found: dict[str, dict[tuple, list[bool]]] = {"q": {}, "i": {}}
    for rs in groups.values():
        for r in rs:
            for part in "qi":
                found[part].setdefault(unit(r, part), []).append(r.correct)
    for part in "qi":  # a question or image with an unscored item is left out of its figure
        if want is not None:
            found[part] = {k: v for k, v in found[part].items() if len(v) >= want[part].get(k, 0)}
    incomplete = _incomplete(groups, sizes)
    for g in incomplete:
        groups.pop(g, None)
    questions, images = found["q"], found["i"]
    return {
        "groups": len(groups),
        "questions": len(questions),
        "images": len(images),
        "items": len(items),
        "incomplete": len(incomplete),
        "q_acc": _ratio(sum(all(v) for v in questions.values()), len(questions)),
        "i_acc": _ratio(sum(all(v) for v in images.values()), len(images)),
        "g_acc": _ratio(sum(all(r.correct for r in rs) for rs in groups.values()), len(groups)),
        "acc": _ratio(sum(items), len(items)),
    }


def summary(rows: Sequence[Scored], expected: Sequence | None = None, yes_no: bool = True) -> dict:
    """accuracy (and YNQ measures when there are YNQ rows), pair and image accuracy, and the pair groups'
    measures (`pair_groups`) when any row is in a group. `expected`: the benchmark's items these rows
    score (BenchItems: id, pair_id, image_id, group_id), so that a pair, image or group with an unscored
    item is left out and counted rather than scored on what is left; None: the rows are everything.
    `yes_no` False: no YNQ measures (a rule that reads no yes or no from the answers: eval's --rule mmvp)."""
    out = accuracy(rows)
    y = [r for r in rows if r.kind == "YNQ"] if yes_no else []
    if y:
        out.update(ynq(y))
    size = (lambda key: None) if expected is None else (lambda key: sizes_of(expected, key))  # noqa: E731
    pairs, images = group_accuracy(rows, "pair_id", size("pair_id")), group_accuracy(rows, "image_id", size("image_id"))
    out["pair_accuracy"], out["pairs"], out["incomplete_pairs"] = (
        pairs["accuracy"],
        pairs["groups"],
        pairs["incomplete"],
    )
    out["image_accuracy"], out["images"], out["incomplete_images"] = (
        images["accuracy"],
        images["groups"],
        images["incomplete"],
    )
    if any(r.group_id is not None for r in rows) or any(it.group_id is not None for it in expected or ()):
        out["pair_groups"] = pair_groups(rows, size("group_id"), expected)
    return out


def by_mode(
    rows: Sequence[Scored], modes: Sequence[str] | None = None, expected: Sequence | None = None, yes_no: bool = True
) -> dict:
    """{"overall": summary, "modes": {mode: summary}, "kinds": {OEQ/YNQ: accuracy}} with modes in the given (or
    first-seen) order; `expected` and `yes_no` as for `summary` (each mode's own items for its figures: an image asked
    in two modes is two images there)."""
    order = list(modes) if modes else list(dict.fromkeys(r.mode for r in rows))

    def of(m):
        return None if expected is None else [it for it in expected if it.mode == m]

    per = {m: summary([r for r in rows if r.mode == m], of(m), yes_no) for m in order if any(r.mode == m for r in rows)}
    kinds = {k: accuracy([r for r in rows if r.kind == k]) for k in ("OEQ", "YNQ") if any(r.kind == k for r in rows)}
    return {"overall": summary(rows, expected, yes_no), "modes": per, "kinds": kinds}


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


def _hb_key(meta: dict, *names: str) -> str:
    return "_".join(str(meta[n]) for n in names)


def _hb_no_figure(meta: dict) -> bool:
    return meta["category"] == "VS" and str(meta["figure_id"]) == "0"


HB_PAIR = ("category", "subcategory", "set_id", "question_id")
HB_FIGURE = ("category", "subcategory", "set_id", "figure_id")


def hallusionbench(rows: Sequence[Scored], expected: Sequence | None = None) -> dict:
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
    `expected`: the benchmark's items (BenchItems with the same meta); a question pair or figure with an
    item that was not scored is left out of qAcc / fAcc and counted (`incomplete_question_pairs`,
    `incomplete_figures`), as for pair and image accuracy. None: the rows are everything.
    """
    right = {r.id: hb_correct(r) for r in rows}
    pairs: dict[str, list[bool]] = {}
    figs: dict[str, list[bool]] = {}
    for r in rows:
        pairs.setdefault(_hb_key(r.meta, *HB_PAIR), []).append(right[r.id])
        if not _hb_no_figure(r.meta):
            figs.setdefault(_hb_key(r.meta, *HB_FIGURE), []).append(right[r.id])
    pair_sizes = fig_sizes = None
    if expected is not None:
        pair_sizes, fig_sizes = {}, {}
        for it in expected:
            k = _hb_key(it.meta, *HB_PAIR)
            pair_sizes[k] = pair_sizes.get(k, 0) + 1
            if not _hb_no_figure(it.meta):
                k = _hb_key(it.meta, *HB_FIGURE)
                fig_sizes[k] = fig_sizes.get(k, 0) + 1
    bad_pairs, bad_figs = _incomplete(pairs, pair_sizes), _incomplete(figs, fig_sizes)
    for k in bad_pairs:
        pairs.pop(k, None)
    for k in bad_figs:
        figs.pop(k, None)
    wrong = [r for r in rows if not right[r.id]]
    said_yes = sum(1 for r in rows if r.said is True)
    return {
        "n": len(rows),
        "aAcc": _ratio(sum(right.values()), len(rows)),
        "qAcc": _ratio(sum(all(v) for v in pairs.values()), len(pairs)),
        "fAcc": _ratio(sum(all(v) for v in figs.values()), len(figs)),
        "question_pairs": len(pairs),
        "figures": len(figs),
        "incomplete_question_pairs": len(bad_pairs),
        "incomplete_figures": len(bad_figs),
        "yes_pct_diff": None if not rows else said_yes / len(rows) - sum(1 for r in rows if r.truth) / len(rows),
        "fp_ratio": _ratio(sum(1 for r in wrong if r.said is True), len(wrong)),
        "unclear": sum(1 for r in rows if r.said is None),
    }
