"""The eight VHTest modes: definitions, what a worker looks for, and question templates (the modes themselves, as
data: vhmine.rules.mode_registry).

Reads and writes nothing: a declarative registry (frozen dataclasses, built once on first use) and
the pure functions the curation library and app call to fill a template, check a worker's answers
and draft the yes/no (YNQ) variants of an open-ended (OEQ) answer.

A template's text has `{slot}` placeholders. An OEQ template names how its answer becomes a YNQ:
- ``derive="value"``: the answer fills slot `answer_slot` of the YNQ template; the true answer
  gives a "yes" question, a wrong one (the other image's answer, else one of the mode's
  `alternatives`) a "no" question;
- ``derive="pick"``: the answer must be one of the filled slots `choices`; the YNQ puts the answer in
  the first of `choices` and the other in the second ("yes"), and swaps them for the "no" question.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import combinations

from vhmine.errors import FormError, InputError
from vhmine.rules.answers import parse_yes_no
from vhmine.rules.mode_registry import KINDS, OEQ, YNQ, Mode, Template, build  # noqa: F401  (KINDS: importable here)
from vhmine.rules.wording import added_function_words, content_words, words


@lru_cache(maxsize=1)
def _registry() -> dict[str, Mode]:
    return build()


# what a worker types into each slot, shown in the empty field (the app's placeholders)
SLOT_HINTS = {
    "where": "on the table, in the centre of the picture",
    "object": "cup",
    "shape": "round",
    "color": "red",
    "direction": "left",
    "text": "STOP",
    "a": "cup",
    "b": "plate",
    "which": "red cup",
    "relation": "to the left of",
    "n": "3",
}


def slot_hint(slot: str) -> str:
    """An example value of a template slot, e.g. "on the table" for {where}."""
    return "e.g. " + SLOT_HINTS[slot] if slot in SLOT_HINTS else ""


def mode_names() -> tuple[str, ...]:
    """The eight modes in VHTest's order: object properties first, then relations."""
    return tuple(_registry())


def get_mode(name: str) -> Mode:
    key = (name or "").strip().lower()
    reg = _registry()
    if key not in reg:
        raise InputError(f"unknown mode {name!r}: choose one of {', '.join(reg)}")
    return reg[key]


def selected_modes(modes: Sequence[str] | None) -> list[str]:
    """The canonical names of the modes asked for (`--mode`, any case); all eight, in order, when none are."""
    return [get_mode(m).name for m in modes or mode_names()]


def get_template(template_id: str) -> Template:
    mode = get_mode(template_id.split(".", 1)[0])
    return mode.template(template_id)


# --- answers -----------------------------------------------------------------------------------

_NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}
_ARTICLES = re.compile(r"^(the|a|an)\s+")


def normalize_answer(text: str) -> str:
    """Lower case, no surrounding punctuation or leading article, number words as digits."""
    s = " ".join((text or "").lower().split())
    s = s.strip(" .,!?;:\"'")
    s = _ARTICLES.sub("", s)
    return str(_NUMBER_WORDS[s]) if s in _NUMBER_WORDS else s


def yes_no_of(answer: str) -> bool | None:
    """A worker's yes/no answer as eval's default rule reads it (vhmine.rules.answers); None: it cannot be read."""
    return parse_yes_no(answer)


def clean_answers(answers: Sequence[str] | str | None) -> list[str]:
    """Non-empty, stripped, de-duplicated answers in the worker's order (one per line when a str)."""
    if answers is None:
        return []
    items = answers.splitlines() if isinstance(answers, str) else list(answers)
    out: list[str] = []
    for a in items:
        a = " ".join(str(a).split())
        if a and normalize_answer(a) not in {normalize_answer(b) for b in out}:
            out.append(a)
    return out


_ARTICLE_A = re.compile(r"(^|\s)a $")


_IS_THERE_A = re.compile(r"(^|\s)is there a $", re.IGNORECASE)
_NOT_PLURAL = ("ss", "us", "is", "ous", "ics")  # glass, bus, iris, ..., physics: an "s" that makes no plural
_SINGULAR_S = frozenset("lens gas canvas atlas series species news chess bias".split())


def _plural(value: str) -> bool:
    """Whether a slot value reads as a plural ("dark vessels", "cups"): its last word ends in an "s" that makes one."""
    last = (words(value) or [""])[-1]
    return len(last) > 3 and last.endswith("s") and not last.endswith(_NOT_PLURAL) and last not in _SINGULAR_S


def _article(literal: str, value: str) -> str:
    """The literal before a slot with its "a" made "an" before a value that starts with a vowel ("an apple"), and
    "is there a" made "are there" before a plural ("Are there dark vessels on the table?")."""
    m = _IS_THERE_A.search(literal)
    if m and _plural(value):
        start = m.start() + len(m.group(1))
        return literal[:start] + ("Are" if literal[start] == "I" else "are") + " there "
    if value[:1].lower() in "aeiou" and _ARTICLE_A.search(literal):
        return literal[:-2] + "an "
    return literal


def fill(template: Template, slots: Mapping[str, str]) -> str:
    """The template's text with every slot filled ("a" before a vowel made "an", "is there a" before a plural made
    "are there"); FormError naming the first empty slot."""
    for name in template.slots:
        if not str(slots.get(name) or "").strip():
            raise FormError(f"slot:{name}", f"slot {{{name}}} of template {template.id} is empty: fill it in")
    out = []
    for literal, name, _, _ in string.Formatter().parse(template.text):
        value = " ".join(str(slots[name]).split()) if name else ""
        out.append((_article(literal, value) if name else literal) + value)
    return "".join(out)


def own_template_id(mode: Mode) -> str:
    """The template id saved with a question reworded past its template (it keeps no slot values)."""
    return f"{mode.name}.own"


def _filled_pattern(template: Template, fixed: Mapping[str, str]) -> re.Pattern:
    """The template's text as a pattern: `fixed` slots must hold their value, the others any words."""
    out, seen = [], set()
    for literal, name, _, _ in string.Formatter().parse(template.text):
        there = _IS_THERE_A.search(literal) if name else None
        if there:  # fill may have made it "an", or "are there" before a plural
            start = there.start() + len(there.group(1))
            out.append(re.escape(literal[:start]) + "(?:is there an?|are there) ")
        elif name and _ARTICLE_A.search(literal):  # fill may have made it "an"
            out.append(re.escape(literal[:-2]) + "an? ")
        else:
            out.append(re.escape(literal))
        if name:
            out.append(
                f"(?P={name})" if name in seen else f"(?P<{name}>{re.escape(fixed[name]) if name in fixed else '.+?'})"
            )
            seen.add(name)
    return re.compile("".join(out), re.IGNORECASE)


def slots_of(template: Template, question: str, slots: Mapping[str, str]) -> dict | None:
    """The slot values a (possibly edited) question still holds; None when it no longer matches them.

    The question filled from the template with other values gives those values (the worker edited a
    value in the text: "What color is the truck?" -> object "truck"); a rewording that still names
    every slot value and the words that say what the template asks keeps `slots`; anything else is the
    worker's own question, with no slot values, and so is a question with a function word (a negation, a
    comparison, a quantifier: vhmine.rules.wording) that neither the template nor the values have.
    """
    given = {k: " ".join(str(slots.get(k) or "").split()) for k in template.slots}
    literal = "".join(lit for lit, _, _, _ in string.Formatter().parse(template.text))
    if added_function_words(question, [literal, *given.values()]):  # "any colour other than": no slot holds it
        return None
    for n_free in range(len(given) + 1):  # keep as many of the given values as the text allows
        for free in combinations(given, n_free):
            fixed = {k: v for k, v in given.items() if k not in free}
            m = _filled_pattern(template, fixed).fullmatch(question)
            if m and all(m.group(k).strip() for k in given):
                return {k: m.group(k).strip() for k in given}
    text = f" {' '.join(_words(question))} "
    asks = content_words(literal) <= set(words(question))  # "What color is the cup?" is no shape question
    if asks and all(_words(v) and f" {' '.join(_words(v))} " in text for v in given.values()):
        return given
    return None


def _words(text: str) -> list[str]:
    return re.findall(r"[\w'-]+", text.lower())


def check_question(question: str) -> str:
    """The question, stripped; FormError when it is empty or still has a `{slot}`."""
    q = " ".join((question or "").split())
    if not q:
        raise FormError("question", "the question is empty: pick a template and fill its slots")
    left = re.search(r"\{([^{}]*)\}", q)
    if left:
        raise FormError("question", f"the question still has an unfilled slot {{{left.group(1)}}}: fill it in")
    return q


def check_oeq_answers(
    mode: Mode, template: Template | None, slots: Mapping[str, str], answers: list[str], where: str
) -> None:
    """FormError when OEQ reference answers are missing or of the wrong form for the mode (template None: the worker's
    own question)."""
    if not answers:
        raise FormError(
            f"answers:{where}", f"no reference answer for {where}: write at least one acceptable answer (one per line)"
        )
    if mode.numeric:
        bad = [a for a in answers if not normalize_answer(a).isdigit()]
        if bad:
            raise FormError(
                f"answers:{where}",
                f"reference answer {bad[0]!r} for {where} is not a whole number: {mode.name} answers are counts,"
                " e.g. 3",
            )
    if template is not None and template.derive == "pick":
        opts = [str(slots.get(c, "")) for c in template.choices]
        norm = {normalize_answer(o) for o in opts}
        if len(norm) < len(opts):  # "the dog or the dog": no answer can tell them apart
            raise FormError(
                f"slot:{template.choices[-1]}",
                f"the choices of template {template.id} are the same ({', '.join(opts)}): name two different objects",
            )
        bad = [a for a in answers if normalize_answer(a) not in norm]
        if bad:
            raise FormError(
                f"answers:{where}", f"reference answer {bad[0]!r} for {where} must be one of: {', '.join(opts)}"
            )
        if len({normalize_answer(a) for a in answers}) > 1:  # both accepted: the drafted yes/no would contradict one
            raise FormError(
                f"answers:{where}",
                f"reference answers for {where} name both {' and '.join(opts)}: "
                "keep the one that is right, or discard the item if neither is",
            )


def check_ynq(truth: bool | None, answers: list[str], where: str) -> None:
    """FormError when a YNQ lacks its truth or a reference answer says the opposite."""
    if truth is None:
        raise FormError(f"truth:{where}", f"the yes/no question for {where} has no truth: choose yes or no")
    for a in answers:
        said = yes_no_of(a)
        if said is not None and said != truth:
            raise FormError(
                f"answers:{where}",
                f"reference answer {a!r} for {where} contradicts the yes/no truth "
                f"({'yes' if truth else 'no'}): fix the answer or the truth",
            )


# --- YNQ drafts ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class YnqDraft:
    template_id: str
    slots: dict = field(hash=False)
    question: str
    truth: bool
    value: str | None  # the answer value the question tests (derive="value"), for later checks


def _bare(value: str) -> str:
    """An answer as a slot value: no leading article or final full stop ("a dog." -> "dog")."""
    v = " ".join(value.split()).rstrip(".!")
    return re.sub(r"^(?i:the|a|an)\s+", "", v)


def _value_words(value: str) -> tuple[str, ...]:
    return tuple(normalize_answer(w) for w in words(value) if w not in ("a", "an", "the"))


def _overlaps(value: str, answers: Sequence[str]) -> bool:
    """Whether `value` is one of `answers`, a part of one, or holds one (word for word)."""
    v = _value_words(value)
    for a in answers:
        w = _value_words(a)
        short, long_ = sorted((v, w), key=len)
        if any(long_[i : i + len(short)] == short for i in range(len(long_) - len(short) + 1)):
            return True
    return False


def draft_ynq(
    mode: Mode, template: Template, slots: Mapping[str, str], answers: Sequence[str], other_answers: Sequence[str] = ()
) -> list[YnqDraft]:
    """Yes (and, where a wrong value can be found, no) questions drafted from an OEQ answer.

    `other_answers` are the other image's answers to the same question: the natural wrong value
    for a pair. Returns [] for a template with no YNQ counterpart.
    """
    if template.kind != OEQ or not template.ynq or not answers:
        return []
    ynq = mode.template(template.ynq)
    base = {k: v for k, v in slots.items()}
    true = answers[0]
    if template.derive == "pick":
        a, b = template.choices
        picked = next(s for s in template.choices if normalize_answer(slots[s]) == normalize_answer(true))
        other = b if picked == a else a
        yes = dict(base, **{a: slots[picked], b: slots[other]})
        no = dict(base, **{a: slots[other], b: slots[picked]})
        return [YnqDraft(ynq.id, yes, fill(ynq, yes), True, None), YnqDraft(ynq.id, no, fill(ynq, no), False, None)]
    slot = template.answer_slot
    known = {normalize_answer(x) for x in answers}
    named = {normalize_answer(v) for k, v in slots.items() if k != slot}
    if normalize_answer(true) in named:
        return []  # "Which mug is the largest?" answered "mug": a question naming it twice asks nothing
    true = _bare(true)
    drafts = [YnqDraft(ynq.id, dict(base, **{slot: true}), fill(ynq, dict(base, **{slot: true})), True, true)]
    # a wrong value that is part of a true one ("blue" beside "light blue"), or holds one, makes a question whose
    # truth the rules cannot read (vhmine.rules.variant): never drafted, so every draft passes its own check
    wrong = next((x for x in other_answers if not _overlaps(x, answers) and normalize_answer(x) not in named), None)
    if wrong is None and mode.numeric:  # the next count that is not an accepted answer
        n = int(normalize_answer(true)) + 1
        while str(n) in known:
            n += 1
        wrong = str(n)
    if wrong is None:
        wrong = next(
            (x for x in mode.alternatives if not _overlaps(x, answers) and normalize_answer(x) not in named), None
        )
    if wrong is not None:
        wrong = _bare(wrong)
        s = dict(base, **{slot: wrong})
        drafts.append(YnqDraft(ynq.id, s, fill(ynq, s), False, wrong))
    return drafts


def check_draft(truth: bool | None, value: str | None, oeq_answers: Sequence[str], where: str) -> None:
    """FormError when a drafted YNQ's truth contradicts the OEQ answers it was made from."""
    check_ynq(truth, [], where)
    if value is None:
        return
    expected = normalize_answer(value) in {normalize_answer(a) for a in oeq_answers}
    if expected != truth:
        raise FormError(
            f"truth:{where}",
            f"yes/no truth {'yes' if truth else 'no'} for {where} contradicts the open-ended answer "
            f"({', '.join(oeq_answers)}): {value!r} is {'one' if expected else 'not one'} of them",
        )
