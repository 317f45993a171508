"""MMVP's rule, as its `scripts/gpt_grader.py` (tsb0601/MMVP) scores an answers file: a judge, then pairs.

Reads and writes nothing. Each answer is graded by a chat model given MMVP's system message and grading prompt
(`grading_request`: the question as the model was shown it, the correct answer, the model's response;
temperature 0.2; MMVP's judge was gpt-4-0314). `read_grade` reads the reply as MMVP does: the whole reply
matched against `^(yes|no)$` ignoring case (so `$` also takes a final newline), lower-cased; anything else is
MMVP's "Could not determine yes or no.". An answer is right only when that gives "yes": `Yes` and `YES` are,
`Yes.`, ` yes` and `Yes\\n` are not. `pair_accuracy` counts as MMVP does over the answers in file order: lines
2k-1 and 2k are a pair, right when both are; an odd last line is in no pair. `grading_fields` gives the question
and correct answer a benchmark item is graded with: an MMVP row's own (`Question` + " " + `Options`, `(a)`), and
for a vhmine yes/no question what the mmvp export writes for it (`YES_NO_OPTIONS`, `(a)` for yes).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from vhmine.llm import ChatRequest

MODEL = "gpt-4-0314"  # MMVP's judge; OpenAI has retired it: name another with --judge
TEMPERATURE = 0.2
SYSTEM = (
    "You are a helpful and precise assistant for checking the quality of the answer. Please answer in only yes or no."
)
UNDETERMINED = "Could not determine yes or no."
YES_NO_OPTIONS = "(a) Yes (b) No"  # a vhmine yes/no question as an MMVP two-option question
LETTERS = ("(a)", "(b)")
_YES_NO = re.compile(r"^(yes|no)$", re.IGNORECASE)


def grading_prompt(question: object, correct_answer: object, response: object) -> str:
    """MMVP's user message to the judge; values are formatted as its f-string formats the answers file's JSON
    values (a null response reads `answer:None`)."""
    return (
        f"Given the following question {question}, the correct answer is {correct_answer}. "
        f"Does the following answer correctly answers the question, answer:{response}?"
    )


def grader_id() -> str:
    """`mmvp_gpt_grader#<sha8>` of the system message and prompt template: what a report records as the rule."""
    text = SYSTEM + "\n" + grading_prompt("{question}", "{correct_answer}", "{response}")
    return f"mmvp_gpt_grader#{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"


def grading_request(model: str, question: object, correct_answer: object, response: object) -> ChatRequest:
    """The judge's request: MMVP's system message and grading prompt, temperature 0.2 (no other parameter of
    MMVP's; vhmine's client adds its max_tokens, which no reply that reads "yes" reaches)."""
    return ChatRequest(
        grading_prompt(question, correct_answer, response),
        system=SYSTEM,
        model=model,
        params={"temperature": TEMPERATURE},
    )


def read_grade(reply: str) -> str:
    """MMVP's reading of the judge's reply: "yes" / "no" (the reply lower-cased) or UNDETERMINED."""
    if _YES_NO.match(reply):
        return reply.lower()
    return UNDETERMINED


def graded_right(reply: str) -> bool:
    """An answer MMVP counts right: its judge's reply reads exactly "yes"."""
    return read_grade(reply) == "yes"


def pair_accuracy(grades: Sequence[bool]) -> tuple[int, int]:
    """(pairs right, pairs) as gpt_grader.py counts the answers in file order: each two consecutive answers are a
    pair, right when both are; an odd last answer is in no pair. MMVP prints right / pairs as a fraction."""
    pairs = len(grades) // 2
    return sum(1 for k in range(pairs) if grades[2 * k] and grades[2 * k + 1]), pairs


def grading_fields(item) -> tuple[str, str]:
    """(question, correct answer) the judge is given for a benchmark item (vhmine.bench.BenchItem): an MMVP row's
    own prompt and `Correct Answer`; a vhmine yes/no question as the mmvp export writes it; an open question
    and its reference answers."""
    meta = item.meta or {}
    if meta.get("source") == "mmvp":
        return item.question, str(meta["correct_answer"])
    if item.kind == "YNQ" and item.truth is not None:
        return f"{item.question} {YES_NO_OPTIONS}", LETTERS[0] if item.truth else LETTERS[1]
    return item.question, " or ".join(item.answers)
