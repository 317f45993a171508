"""People's wordings stay protected, and every wording the rules draft passes the rules' own check (issue 32).

- A wording the rules cannot map to a template with certainty (a negation, a comparison, a quantifier the template
  does not have) is the worker's own: `slots_of` gives no slots, so no slot ever holds the question's function words
  (before: "Is the mug any colour other than white?" was read as color.is_color with the object "mug any colour
  other than", and an erratum on its source then re-derived its truth instead of queueing it for a person).
- Every yes/no question `draft_ynq` drafts passes `check_variant`, the check Confirm runs (before: "Is the cup
  blue?" drafted as the "no" of an image answered "light blue", and "NO PARKING" read as a negation, were refused
  by Confirm with "...or word it as the template does").
- A model's draft whose question does not fit its template is refused when drafted (before: shape.what_shape with
  "What color is the cup?" became a ready shape question).
- Articles agree with the value: "Are there dark vessels on the table?", never "Is there a dark vessels".
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vhmine.errors import FormError
from vhmine.rules import modes as M
from vhmine.rules.draft_check import check_content, parse_draft
from vhmine.rules.variant import check_variant
from vhmine.rules.wording import FUNCTION_WORDS, is_function_word, words

NOUNS = ("mug", "cup", "teacup", "red car", "dog", "cat", "plate", "sign", "table", "window", "book", "tree")
PLACES = ("on the table", "in the centre of the picture", "by the window", "on the left")
VALUES = {  # answer values per mode beside its alternatives, with some that hold function words or are multi-word
    "existence": ("a cup", "a spoon", "dark vessels", "nothing", "a no-entry sign", "an apple"),
    "shape": ("round", "square", "oval", "heart-shaped", "round with a handle"),
    "color": ("red", "blue", "light blue", "dark red", "white", "off white", "pale green"),
    "orientation": ("left", "right", "towards the camera", "away from the camera"),
    "ocr": ("STOP", "GO", "NO PARKING", "NOT FOR SALE", "ONLY", "EXIT"),
    "position": ("to the left of", "to the right of", "above", "below", "behind", "in front of"),
    "counting": ("3", "2", "0", "one", "seven"),
    "size": (),
}
OPEN = [t for m in M.mode_names() for t in M.get_mode(m).templates_of(M.OEQ) if t.ynq]
EVERY = [t for m in M.mode_names() for t in M.get_mode(m).templates]


def _slot_value(name: str):
    return st.sampled_from(PLACES if name == "where" else NOUNS)


@st.composite
def filled(draw):
    """(template, slot values, the filled question): any template of any mode."""
    tpl = draw(st.sampled_from(EVERY))
    slots = {}
    for name in tpl.slots:
        pool = (
            VALUES.get(M.get_template(tpl.id).id.split(".")[0], ())
            if name in ("color", "shape", "direction", "relation", "text", "n")
            else ()
        )
        slots[name] = draw(st.sampled_from(pool) if pool else _slot_value(name))
    return tpl, slots, M.fill(tpl, slots)


@st.composite
def reworded(draw):
    """A filled question with function words put in at word boundaries ("Is the mug any colour other than white?")."""
    tpl, slots, question = draw(filled())
    parts = question.rstrip("?").split(" ")
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(1, len(parts)))
        parts.insert(at, draw(st.sampled_from(sorted(FUNCTION_WORDS) + ["isn't", "colour other than", "any"])))
    return tpl, slots, " ".join(parts) + "?"


@given(filled())
def test_a_filled_template_keeps_its_slots(case):
    tpl, slots, question = case
    assert M.slots_of(tpl, question, slots) == {k: " ".join(v.split()) for k, v in slots.items()}


@given(reworded())
def test_no_parsed_slot_holds_the_questions_function_words(case):
    """Whatever function words a rewording adds, no slot value read from it holds one the values given did not have
    (read with the values given, as annotate and confirm read them, and without, as verify reads a model's yes/no)."""
    tpl, slots, question = case
    for given_slots in (slots, {}):
        got = M.slots_of(tpl, question, given_slots)
        if got is None:
            continue
        for name, value in got.items():
            extra = [w for w in words(value) if is_function_word(w) and w not in words(given_slots.get(name, ""))]
            assert not extra, (question, name, value)


def test_the_issues_reworded_negation_is_the_workers_own():
    is_color = M.get_template("color.is_color")
    assert M.slots_of(is_color, "Is the mug any colour other than white?", {"object": "mug", "color": "white"}) is None
    assert M.slots_of(is_color, "Is the mug any colour other than white?", {}) is None
    assert M.slots_of(is_color, "Isn't the mug white?", {"object": "mug", "color": "white"}) is None
    # a value that holds a function word is the value: ocr's quoted text, a slot given so
    does_say = M.get_template("ocr.does_say")
    assert M.slots_of(does_say, 'Does the text on the sign say "NO PARKING"?', {}) == {
        "object": "sign",
        "text": "NO PARKING",
    }


@st.composite
def pair_answers(draw):
    """(mode, open template, slots, answers of image A, answers of image B): what a worker saves for a pair."""
    tpl = draw(st.sampled_from(OPEN))
    mode = M.get_mode(tpl.id.split(".")[0])
    slots = {name: draw(_slot_value(name)) for name in tpl.slots}
    if tpl.derive == "pick":
        a, b = tpl.choices
        slots[b] = draw(st.sampled_from([n for n in NOUNS if M.normalize_answer(n) != M.normalize_answer(slots[a])]))
        first = draw(st.sampled_from(tpl.choices))
        return mode, tpl, slots, [slots[first]], [slots[b if first == a else a]]
    pool = sorted(set(VALUES.get(mode.name, ()) + mode.alternatives)) or list(NOUNS)
    here = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique_by=M.normalize_answer))
    rest = [v for v in pool if M.normalize_answer(v) not in {M.normalize_answer(h) for h in here}]
    other = (
        draw(
            st.lists(
                st.sampled_from(rest),
                min_size=0 if mode.alternatives or mode.numeric else 1,
                max_size=2,
                unique_by=M.normalize_answer,
            )
        )
        if rest
        else []
    )
    return mode, tpl, slots, here, other


@given(pair_answers())
def test_every_drafted_wording_passes_its_own_confirm_check(case):
    """Confirm (curate.drafts) checks a kept draft with check_variant against this image's answers and the pair's
    other answers: every question draft_ynq drafts from those answers must be read, and agree."""
    mode, tpl, slots, here, other = case
    M.check_oeq_answers(mode, tpl, slots, here, "image A")
    for d in M.draft_ynq(mode, tpl, slots, here, other):
        assert check_variant(mode, tpl, slots, d.question, d.truth, here, other, "q") is True, (d.question, here, other)


@given(pair_answers())
def test_a_pair_drafted_from_its_answers_has_nothing_left_to_check(case):
    mode, tpl, slots, here, other = case
    if not other or {M.normalize_answer(x) for x in here} & {M.normalize_answer(x) for x in other}:
        return
    content = check_content(mode.name, ["A", "B"], tpl.id, slots, None, {"A": here, "B": other}, None)
    assert content.unchecked == ()
    for y in content.yes_no:
        assert len(set(y.truths.values())) == 2


def test_the_issues_drafts_that_confirm_refused():
    color, what = M.get_mode("color"), M.get_template("color.what_color")
    drafts = M.draft_ynq(color, what, {"object": "cup"}, ["light blue"], ["blue"])
    assert [d.question for d in drafts] == ["Is the cup light blue?", "Is the cup red?"]  # "blue" would be unreadable
    size, largest = M.get_mode("size"), M.get_template("size.largest")  # hypothesis' shrunk counterexamples
    assert M.draft_ynq(size, largest, {"object": "mug"}, ["mug"], ["cup"]) == []  # "the largest mug" is "mug"?
    [yes] = M.draft_ynq(size, largest, {"object": "mug"}, ["cup"], ["mug"])  # no "no" question naming "mug" twice
    assert check_variant(size, largest, {"object": "mug"}, yes.question, True, ["cup"], ["mug"], "q") is True
    big = M.draft_ynq(size, largest, {"object": "mug"}, ["the big mug"], ["the small mug"])
    assert [(d.question, d.truth) for d in big] == [
        ("Is the big mug the largest mug in the picture?", True),
        ("Is the small mug the largest mug in the picture?", False),
    ]
    for d in big:
        assert (
            check_variant(
                size, largest, {"object": "mug"}, d.question, d.truth, ["the big mug"], ["the small mug"], "q"
            )
            is True
        )
    ocr, text = M.get_mode("ocr"), M.get_template("ocr.what_text")
    [yes] = M.draft_ynq(ocr, text, {"object": "sign"}, ["NO PARKING"], [])
    assert check_variant(ocr, text, {"object": "sign"}, yes.question, True, ["NO PARKING"], [], "q") is True


def test_a_draft_whose_text_does_not_fit_its_template_is_refused():
    draft = {
        "template": "shape.what_shape",
        "slots": {"object": "cup"},
        "question": "What color is the cup?",
        "answer_a": "round",
        "answer_b": "square",
    }
    refused = r"the question 'What color is the cup\?' does not fit template shape\.what_shape"
    with pytest.raises(FormError, match=refused):
        parse_draft(json.dumps(draft), "shape", ["A", "B"])
    draft["question"] = "What shape is the cup?"  # reworded, still its template's question
    assert parse_draft(json.dumps(draft), "shape", ["A", "B"]).template_id == "shape.what_shape"


@pytest.mark.parametrize(
    "value, question",
    [
        ("dark vessels", "Are there dark vessels on the table?"),
        ("cups", "Are there cups on the table?"),
        ("apple", "Is there an apple on the table?"),
        ("glass", "Is there a glass on the table?"),
        ("lens", "Is there a lens on the table?"),
        ("bus", "Is there a bus on the table?"),
    ],
)
def test_articles_agree_with_the_value(value, question):
    tpl = M.get_template("existence.is_there_at")
    assert M.fill(tpl, {"object": value, "where": "on the table"}) == question
    slots = {"object": value, "where": "on the table"}
    assert M.slots_of(tpl, question, slots) == slots
