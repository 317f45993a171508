"""Hallucination detection on one case's answers: correctness and consistency.

Reads the questions of one (edited image, question family) and the victim's answers; writes nothing.
Correctness uses the same code as probe: a judge model's verdict through vhmine.rules.judge (the paper's
teacher prompt plays this part; reference = the truth the edit implies, e.g. "There is no cup."),
read with probe.judge_verdict, or without a judge the yes/no rule through probe.rule_verdict
(vhmine.rules.answers). With a judge, an answer whose judge request failed stays unjudged (no verdict,
`unjudged`): it is never read by the yes/no rule instead. Consistency: two answers about the same fact at different
context levels that read as opposite yes/no (vhmine.rules.answers), or an existence answer that denies an object the
victim's own caption of the image names. The paper asks its judge whether two answers conflict; vhmine reads both
as yes/no instead, so a consistency verdict costs no request and means the same on every rerun.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from vhmine import rules as R
from vhmine.manipulate.prior import match_names
from vhmine.manipulate.questions import Question
from vhmine.models import judge_verdict, rule_verdict


@dataclass
class Judged:
    question: Question
    answer: str | None  # None: the request failed
    verdict: str | None = None  # correct, hallucinated, or None (unreadable / unjudged)
    conflicts: list[str] = field(default_factory=list)  # levels this answer conflicts with; "caption" too
    unjudged: bool = False  # the judge's request failed: no verdict


@dataclass
class FamilyResult:
    case_id: str
    strategy: str
    family: str  # existence or spatial
    asked: int  # questions answered
    by_correctness: bool
    by_consistency: bool
    first_induced: int | None  # 1-based: the question after which the case counts as induced
    items: list[Judged] = field(default_factory=list)

    @property
    def unjudged(self) -> int:
        """Answers whose judge request failed."""
        return sum(it.unjudged for it in self.items)

    @property
    def success(self) -> bool:
        return self.by_correctness or self.by_consistency


def correctness(q: Question, answer: str, rule: str, judge_text: str | None = None) -> str | None:
    """correct / hallucinated / None: the judge's verdict when there is one, else the yes/no rule."""
    if judge_text is not None:
        return judge_verdict(judge_text)
    return rule_verdict(answer, q.truth, rule)


def caption_conflict(q: Question, answer: str, caption: str | None, rule: str) -> bool:
    """The victim's caption names the object, and its answer says it is not there."""
    if q.family != "existence" or not caption:
        return False
    return bool(match_names(caption, [q.obj])) and R.parse_yes_no(answer, rule) is False


def judge_family(
    case_id: str,
    strategy: str,
    family: str,
    questions: Sequence[Question],
    answers: Sequence[str | None],
    rule: str,
    caption: str | None = None,
    judge_texts: Sequence[str | None] | None = None,
) -> FamilyResult:
    """Correctness and consistency of one family's answers, in the order asked. `judge_texts` (with a judge):
    the judge's answer per question, None where its request failed (that answer is left unjudged)."""
    items = [Judged(q, a) for q, a in zip(questions, answers)]
    first_corr = first_cons = None
    said: list[bool | None] = []
    for k, it in enumerate(items, start=1):
        if it.answer is None:
            said.append(None)
            continue
        jt = judge_texts[k - 1] if judge_texts is not None else None
        if judge_texts is not None and jt is None:  # the judge gave nothing: no verdict, not the rule's reading
            it.unjudged = True
        else:
            it.verdict = correctness(it.question, it.answer, rule, jt)
        yes = R.parse_yes_no(it.answer, rule)
        said.append(yes)
        for j in range(k - 1):
            other = items[j]
            if other.question.fact == it.question.fact and said[j] is not None and yes is not None and said[j] != yes:
                it.conflicts.append(other.question.level)
                other.conflicts.append(it.question.level)
        if caption_conflict(it.question, it.answer, caption, rule):
            it.conflicts.append("caption")
        if it.verdict == "hallucinated" and first_corr is None:
            first_corr = k
        if it.conflicts and first_cons is None:
            first_cons = k
    firsts = [f for f in (first_corr, first_cons) if f is not None]
    return FamilyResult(
        case_id,
        strategy,
        family,
        sum(it.answer is not None for it in items),
        first_corr is not None,
        first_cons is not None,
        min(firsts) if firsts else None,
        items,
    )
