"""What a drafted yes/no variant asserts, read against the open answers it was made from, however it is worded.

Reads and writes nothing: pure functions over vhmine.rules.modes. `implied_truth` reads the variant's text for the
value it names (one of this image's answers, the other image's, one of the mode's alternatives, a count)
or, for a choice template (size.which_larger), which object it calls larger, and returns the truth the open
answers give it on one image; None where the text cannot be read that surely (a negation or a quantifier
the template does not have, no value or two at once, a value only part of an answer, objects in an order
it cannot tell). `check_variant` turns a contradiction into a FormError and returns whether the check
decided: a variant it could not decide goes to a worker to check (rules.draft_check, curate.decisions.drafts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from vhmine.errors import FormError
from vhmine.rules import modes as M
from vhmine.rules.wording import FUNCTION_WORDS, added_function_words

ARTICLES = ("a", "an", "the")
HEDGES = FUNCTION_WORDS  # words that change what a question asserts (vhmine.rules.wording, shared with modes.slots_of)
# what a choice template's question says of its first-named object (the rest of the text aside)
LARGER = {"size.which_larger": (("larger", "bigger", "greater"), ("smaller", "tinier", "littler"))}
# a relation between {a} and {b} read with the objects the other way round (position.where)
INVERSE = {
    "to the left of": "to the right of",
    "left of": "right of",
    "left": "right",
    "above": "below",
    "over": "under",
    "in front of": "behind",
    "on top of": "under",
    "on": "under",
}
INVERSE.update({v: k for k, v in list(INVERSE.items())})


def _words(text: str) -> list[str]:
    """Lower-case words, number words as digits (vhmine.rules.modes.normalize_answer on each)."""
    return [M.normalize_answer(w) for w in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", str(text or "").lower())]


def _bare(words: Sequence[str]) -> tuple[str, ...]:
    return tuple(w for w in words if w not in ARTICLES)


def _spans(words: Sequence[str], phrase: Sequence[str]) -> list[tuple[int, int]]:
    n = len(phrase)
    return [(i, i + n) for i in range(len(words) - n + 1) if n and tuple(words[i : i + n]) == tuple(phrase)]


def _hedged(question: str, allowed: Sequence[str]) -> bool:
    """A function word the `allowed` texts (the template, the slot values, the answers) do not have: a value that holds
    one ("NO PARKING", "cup without a handle") is the value, not a negation of the question."""
    return bool(added_function_words(question, allowed))


def _relation(a: tuple[str, ...], b: tuple[str, ...]) -> str:
    if a == b:
        return "same"
    if _spans(a, b) or _spans(b, a):
        return "part"  # "red" against "dark red": the check cannot say
    return "other"


def _pick(tpl: M.Template, slots: Mapping[str, str], words: list[str], here: Sequence[str]) -> tuple[bool, str] | None:
    """size.which_larger: the object the question calls larger, and whether it is this image's answer."""
    if tpl.id not in LARGER:
        return None
    more, less = LARGER[tpl.id]
    objs = {c: _bare(_words(slots.get(c, ""))) for c in tpl.choices}
    found = {c: _spans(words, w) for c, w in objs.items()}
    if any(len(v) != 1 for v in found.values()):
        return None  # an object not named, or named twice: the order cannot be read
    (first, s1), (second, s2) = sorted(((c, v[0]) for c, v in found.items()), key=lambda x: x[1])
    said = [w for w in words if w in more or w in less]
    if s1[1] > s2[0] or len(said) != 1:
        return None
    larger = first if said[0] in more else second
    answer = {_bare(_words(a)) for a in here}
    if len(answer) != 1:
        return None
    return objs[larger] == answer.pop(), slots[larger]


def _value(
    mode: M.Mode,
    tpl: M.Template,
    ynq: M.Template,
    slots: Mapping[str, str],
    question: str,
    words: list[str],
    here: Sequence[str],
    other: Sequence[str],
) -> tuple[str, ...] | None:
    """The one value the question names in the answer's slot (its words), else None."""
    slot = tpl.answer_slot
    masked = list(words)
    for name, value in slots.items():  # "red" inside the object "red car" names no colour
        if name != slot:
            for i, j in _spans(masked, _bare(_words(value))):
                masked[i:j] = [""] * (j - i)
    if f'"{{{slot}}}"' in ynq.text:  # ocr: the text in quotes is the value, as a whole
        quoted = re.findall(r'"([^"]+)"|“([^”]+)”', question)
        return _bare(_words(quoted[0][0] or quoted[0][1])) if len(quoted) == 1 else None
    cands = {_bare(_words(c)) for c in list(here) + list(other) + list(mode.alternatives)} - {()}
    if mode.numeric:
        cands |= {(w,) for w in masked if w.isdigit()}
    # a value inside another slot's value is no value ("red" in "red car"); one that holds it is ("big mug" with the
    # object "mug": "Is the big mug the largest mug?")
    masks = [sp for name, value in slots.items() if name != slot for sp in _spans(words, _bare(_words(value)))]
    hits = sorted(
        ((sp, c) for c in cands for sp in _spans(words, c) if not any(m[0] <= sp[0] and sp[1] <= m[1] for m in masks)),
        key=lambda x: (x[0][0], x[0][0] - x[0][1]),
    )
    found, end = set(), -1
    for (i, j), c in hits:  # the longest value at each place ("to the left of" over "left")
        if i >= end:
            found.add(c)
            end = j
        elif j > end:
            return None  # two values overlapping: which one is meant?
    return found.pop() if len(found) == 1 else None  # none, or two ("red or blue")


def _read(
    mode: M.Mode,
    tpl: M.Template,
    slots: Mapping[str, str] | None,
    question: str,
    here: Sequence[str],
    other: Sequence[str],
) -> tuple[bool, str] | None:
    slots = dict(slots or {})
    ynq = mode.template(tpl.ynq) if tpl.ynq else None
    if ynq is None or tpl.derive not in ("value", "pick") or not here:
        return None
    words = list(_bare(_words(question)))
    if _hedged(question, [ynq.text, *slots.values(), *here, *other]):
        return None
    if tpl.derive == "pick":
        return _pick(tpl, slots, words, here)
    value = _value(mode, tpl, ynq, slots, question, words, here, other)
    if value is None:
        return None
    if tpl.id == "position.where":  # the relation holds from {a} to {b}: read the objects' order
        a, b = (_spans(words, _bare(_words(slots.get(k, "")))) for k in ("a", "b"))
        if len(a) != 1 or len(b) != 1:
            return None
        if a[0][0] > b[0][0]:
            inv = {_bare(k.split()): _bare(v.split()) for k, v in INVERSE.items()}.get(value)
            if inv is None:
                return None
            value = inv
    rel = {_relation(value, _bare(_words(h))) for h in here}
    if "same" in rel:
        return True, " ".join(value)
    return None if "part" in rel else (False, " ".join(value))


def implied_truth(
    mode: M.Mode,
    tpl: M.Template,
    slots: Mapping[str, str] | None,
    question: str,
    here: Sequence[str],
    other: Sequence[str] = (),
) -> bool | None:
    """The truth this image's open answers (`here`; `other`: the other image's) give the yes/no `question`
    drafted from the open template `tpl` (filled with `slots`); None when the check cannot decide."""
    got = _read(mode, tpl, slots, question, here, other)
    return None if got is None else got[0]


def check_variant(
    mode: M.Mode,
    tpl: M.Template,
    slots: Mapping[str, str] | None,
    question: str,
    truth: bool | None,
    here: Sequence[str],
    other: Sequence[str],
    where: str,
) -> bool:
    """FormError when the variant's truth contradicts what the open answers imply; False when the check cannot
    decide (a worker checks it), True when it agrees."""
    M.check_ynq(truth, [], where)
    got = _read(mode, tpl, slots, question, here, other)
    if got is None:
        return False
    implied, value = got
    if implied != truth:
        raise FormError(
            f"truth:{where}",
            f"yes/no truth {'yes' if truth else 'no'} for {where} contradicts the open-ended answer "
            f"({', '.join(here)}): {value!r} is {'one' if implied else 'not one'} of them",
        )
    return True


def undecided_message(question: str, where: str) -> str:
    return (
        f"the check cannot tell whether the yes/no question {question!r} ({where}) agrees with the open answers "
        "(a negation, a comparison, no value it can find, or a value only part of an answer): look at the "
        "image(s) and mark it checked, or word it as the template does"
    )
