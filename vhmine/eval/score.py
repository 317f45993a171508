"""eval's scoring: each answer read (yes/no by a named rule, open answers by match or by given verdicts).

Reads a Benchmark and one model's answers (ModelAnswers); writes nothing. `score` gives the rows
vhmine.eval.metrics aggregates and one detail record per item (eval writes them as answers-<model>.jsonl),
each with its `verdict`: who decided it (`rule:<rule>`, `match`, `judge:<judge>`, `labels`) and why, in words;
an item whose request failed is listed, never scored. `judge_agreement` compares the judge's verdicts
with the workers' majority on the same answers (Cohen's kappa, vhmine.curate.people.kappa).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from vhmine.bench import YNQ, Benchmark
from vhmine.errors import EvalError
from vhmine.eval import metrics as MT


def match_oeq(answer: str, references: Sequence[str]) -> bool:
    """Any reference answer appears in the answer as whole words (case, punctuation, articles and number words
    aside): the one implementation, vhmine.rules.harness', which the harness exports embed as it is."""
    from vhmine.rules import match_oeq as match

    return match(answer, references)


@dataclass
class ModelAnswers:
    model: str
    answers: dict[str, str]  # item id -> answer text (items whose request failed are not here)
    source: str  # "predictions:<file>" or "endpoint:<url>"
    failures: dict[str, str] = field(default_factory=dict)  # item id -> "<status>: <why no answer>"; never scored
    harness: str | None = None  # who wrote the predictions file (vhmine, vlmevalkit, lmms-eval); None: asked here
    lines: list | None = None  # MMVP's answers file's lines, in file order (predictions.mmvp.AnswerLine); else None


def _oeq_verdict(oeq: str, text: str, references: Sequence[str], v: bool | None, judge: str | None) -> dict:
    """Who decided an open answer, and why (the detail record's `verdict`)."""
    if oeq == "match":
        hit = next((r for r in references if match_oeq(text, [r])), None)
        return {
            "by": "match",
            "reason": f"the reference answer {hit!r} appears in the answer"
            if hit is not None
            else "no reference answer appears in the answer (" + " / ".join(map(repr, references)) + ")",
        }
    if oeq == "judge":
        said = {True: "correct", False: "incorrect", None: "unclear (scored wrong)"}[v]
        return {"by": f"judge:{judge or '?'}", "reason": f"the judge said {said}"}
    said = {True: "correct", False: "hallucinated", None: "none (tied or not labelled; scored wrong)"}[v]
    return {"by": "labels", "reason": f"the store's verdict on this answer: {said}"}


def score(
    bench: Benchmark,
    ans: ModelAnswers,
    rule: str,
    oeq_verdicts: dict[str, bool | None],
    oeq: str,
    partial: bool = False,
    judge: str | None = None,
    no_answer: set[str] | frozenset[str] = frozenset(),
) -> tuple[list[MT.Scored], list[dict]]:
    """Scored rows for the metrics, and one detail record per item (`judge`: the judge's name, for verdicts;
    `no_answer`: the open answers whose store verdict is "no answer", scored wrong and read as "no answer")."""
    from vhmine.rules import get_rule

    parse = get_rule(rule).parse
    missing = [it.id for it in bench if it.id not in ans.answers and it.id not in ans.failures]
    if missing and not partial:
        raise EvalError(
            f"{len(missing)} of {len(bench)} items have no answer from {ans.model} in {ans.source} "
            f"(first: {missing[0]}): pass --partial to score only the answered ones"
        )
    rows, details = [], []
    for it in bench:
        base = {"id": it.id, "mode": it.mode, "kind": it.kind, "question": it.question, "reference": it.reference()}
        if it.id in ans.failures:  # no answer (or no judge verdict) came back: listed, never scored
            details.append(
                {
                    **base,
                    "answer": ans.answers.get(it.id),
                    "read_as": "failed",
                    "correct": None,
                    "failure": ans.failures[it.id],
                    "verdict": {"by": "none", "reason": f"not scored: {ans.failures[it.id]}"},
                }
            )
            continue
        if it.id not in ans.answers:
            continue
        text = ans.answers[it.id]
        said = None
        if it.kind == YNQ:
            said = parse(text)
            correct = said is not None and said == it.truth
            how = "unreadable" if said is None else ("yes" if said else "no")
            verdict = {
                "by": f"rule:{rule}",
                "reason": (
                    f"read as {how}, the truth is {'yes' if it.truth else 'no'}"
                    if said is not None
                    else "unreadable as yes or no (scored wrong)"
                ),
            }
        else:
            v = match_oeq(text, it.answers) if oeq == "match" else oeq_verdicts.get(it.id)
            correct = bool(v)
            how = {True: "right", False: "wrong", None: "unjudged"}[v]
            verdict = _oeq_verdict(oeq, text, it.answers, v, judge)
            if oeq == "labels" and it.id in no_answer:  # a refusal: a miss, as VHTest counts it, but no hallucination
                how = "no answer"
                verdict = {"by": "labels", "reason": "the store's verdict on this answer: no answer (scored wrong)"}
        rows.append(
            MT.Scored(it.id, it.mode, it.kind, correct, said, it.truth, it.pair_id, it.image_id, it.meta, it.group_id)
        )
        details.append({**base, "answer": text, "read_as": how, "correct": correct, "verdict": verdict})
    return rows, details


def group_sizes(bench: Benchmark) -> dict[str, int]:
    """Pair group id -> its items in the benchmark (metrics.pair_groups leaves out a group scored in part)."""
    out: dict[str, int] = {}
    for it in bench:
        if it.group_id is not None:
            out[it.group_id] = out.get(it.group_id, 0) + 1
    return out


def judge_agreement(judge: dict[str, bool | None], workers: dict[str, bool | None]) -> dict:
    """Cohen's kappa between the judge's verdicts and the workers' majority, over the items both gave one.

    An "unclear" judge answer or a tie among workers (None) is no verdict: that item is not compared.
    kappa is None where it is undefined (every verdict of both in one category).
    """
    from vhmine import curate

    both = sorted(i for i in judge if judge[i] is not None and workers.get(i) is not None)
    a, b = [judge[i] for i in both], [workers[i] for i in both]
    k = curate.people.cohen_kappa(a, b)
    return {
        "items": len(both),
        "agree": sum(x == y for x, y in zip(a, b)),
        "kappa": None if math.isnan(k) else round(k, 4),
        "judge_only": sum(v is not None and workers.get(i) is None for i, v in judge.items()),
        "workers_only": sum(v is not None and judge.get(i) is None for i, v in workers.items()),
    }
