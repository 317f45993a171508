"""vhmine.rules.variant: what a yes/no variant asserts, read against the open answers however it is worded; where
the text cannot be read surely, no verdict (a worker checks it)."""

import json

import pytest

from vhmine.errors import FormError
from vhmine.rules import modes as M
from vhmine.rules.variant import check_variant, implied_truth

# (mode, open template, slots, question, this image's answers, the other image's, implied truth)
CASES = [
    # the issue's: a choice answered "dog" on A, and a colour reworded
    ("size", "size.which_larger", {"a": "dog", "b": "cat"}, "Is the dog larger than the cat?", ["dog"], ["cat"], True),
    ("color", "color.what_color", {"object": "cup"}, "Does the cup look red?", ["red"], ["blue"], True),
    ("color", "color.what_color", {"object": "cup"}, "Does the cup look red?", ["blue"], ["red"], False),
    # other wordings of the same claims
    (
        "size",
        "size.which_larger",
        {"a": "dog", "b": "cat"},
        "Is the cat smaller than the dog?",
        ["the dog"],
        ["cat"],
        True,
    ),
    (
        "size",
        "size.which_larger",
        {"a": "dog", "b": "cat"},
        "Does the cat look bigger than the dog here?",
        ["dog"],
        ["cat"],
        False,
    ),
    ("color", "color.what_color", {"object": "red car"}, "Is the red car blue?", ["blue"], ["green"], True),
    ("color", "color.what_color", {"object": "cup"}, "Would you call the paint of it blue?", ["red"], ["blue"], False),
    ("counting", "counting.how_many", {"object": "cats"}, "Do you see three cats?", ["3"], ["2"], True),
    ("counting", "counting.how_many", {"object": "cats"}, "Can you count 4 cats?", ["3"], ["2"], False),
    (
        "position",
        "position.where",
        {"a": "cat", "b": "dog"},
        "Is the dog to the left of the cat?",
        ["to the left of"],
        ["to the right of"],
        False,
    ),
    (
        "position",
        "position.where",
        {"a": "cat", "b": "dog"},
        "Is the dog to the right of the cat?",
        ["to the left of"],
        [],
        True,
    ),
    ("ocr", "ocr.what_text", {"object": "sign"}, 'Does the sign read "SHOP"?', ["STOP"], ["SHOP"], False),
    (
        "existence",
        "existence.what_is",
        {"where": "on the table"},
        "Can you see a cup on the table?",
        ["a cup"],
        ["a spoon"],
        True,
    ),
    # no verdict: negations, comparisons, two values, a value only part of an answer, objects not found
    ("color", "color.what_color", {"object": "cup"}, "Is the cup not red?", ["red"], ["blue"], None),
    ("color", "color.what_color", {"object": "cup"}, "Isn't the cup red?", ["red"], ["blue"], None),
    ("color", "color.what_color", {"object": "cup"}, "Is the cup red or blue?", ["red"], ["blue"], None),
    ("color", "color.what_color", {"object": "cup"}, "Is the cup red?", ["dark red"], ["blue"], None),
    ("color", "color.what_color", {"object": "cup"}, "Is the cup pretty?", ["red"], ["blue"], None),
    ("counting", "counting.how_many", {"object": "cats"}, "Are there more than 2 cats?", ["3"], ["2"], None),
    ("size", "size.which_larger", {"a": "dog", "b": "cat"}, "Is the dog or the cat larger?", ["dog"], ["cat"], None),
    (
        "size",
        "size.which_larger",
        {"a": "dog", "b": "cat"},
        "Is the puppy larger than the kitten?",
        ["dog"],
        ["cat"],
        None,
    ),
    (
        "position",
        "position.where",
        {"a": "cat", "b": "dog"},
        "Is the kitten to the left of the puppy?",
        ["to the left of"],
        [],
        None,
    ),
    ("ocr", "ocr.what_text", {"object": "sign"}, "Does the sign say stop?", ["STOP"], ["SHOP"], None),
]


@pytest.mark.parametrize("mode, tpl, slots, question, here, other, expected", CASES)
def test_implied_truth(mode, tpl, slots, question, here, other, expected):
    assert implied_truth(M.get_mode(mode), M.get_template(tpl), slots, question, here, other) is expected


def test_check_variant_raises_on_a_contradiction_and_says_when_it_cannot_decide():
    size, pick = M.get_mode("size"), M.get_template("size.which_larger")
    with pytest.raises(
        FormError, match=r"yes/no truth no for q on A contradicts the open-ended answer \(dog\): 'dog' is one of them"
    ):
        check_variant(
            size, pick, {"a": "dog", "b": "cat"}, "Is the dog larger than the cat?", False, ["dog"], ["cat"], "q on A"
        )
    assert check_variant(
        size, pick, {"a": "dog", "b": "cat"}, "Is the dog larger than the cat?", True, ["dog"], ["cat"], "q"
    )
    assert not check_variant(
        size, pick, {"a": "dog", "b": "cat"}, "Is the dog or the cat larger?", True, ["dog"], ["cat"], "q"
    )


def test_the_issues_drafts_are_rejected_by_rule():
    """`vhmine draft`'s rules on the issue's examples: they passed before (no check of a choice, none of a wording
    other than the template's)."""
    from vhmine.rules.draft_check import parse_draft

    size = {
        "template": "size.which_larger",
        "slots": {"a": "dog", "b": "cat"},
        "answer_a": "dog",
        "answer_b": "cat",
        "yes_no": [{"question": "Is the dog larger than the cat?", "answer_a": "no", "answer_b": "yes"}],
    }
    with pytest.raises(
        FormError, match=r"yes/no truth no for 'Is the dog larger than the cat\?' on image A contradicts"
    ):
        parse_draft(json.dumps(size), "size", ["A", "B"])
    color = {
        "template": "color.what_color",
        "slots": {"object": "cup"},
        "answer_a": "red",
        "answer_b": "blue",
        "yes_no": [{"question": "Does the cup look red?", "answer_a": "no", "answer_b": "yes"}],
    }
    with pytest.raises(
        FormError, match=r"yes/no truth no for 'Does the cup look red\?' on image A contradicts .*\(red\): 'red' is one"
    ):
        parse_draft(json.dumps(color), "color", ["A", "B"])
    # read right, they pass; one the rules cannot read passes to the verifier, listed as unchecked
    color["yes_no"] = [
        {"question": "Does the cup look red?", "answer_a": "yes", "answer_b": "no"},
        {"question": "Is the cup not blue?", "answer_a": "yes", "answer_b": "no"},
    ]
    got = parse_draft(json.dumps(color), "color", ["A", "B"])
    assert got.unchecked == ("Is the cup not blue?",)
