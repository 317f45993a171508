"""rules.mmvp: MMVP's grader (tsb0601/MMVP scripts/gpt_grader.py) as its text says: the system message and prompt
word for word, the reply read by its regex and lower-casing (only a reply that is exactly "yes", in any case, is
right), pairs as two consecutive answers both right, an odd last answer in none."""

import pytest
from hypothesis import given
from hypothesis import strategies as hs

from vhmine.bench import BenchItem
from vhmine.rules import mmvp as R

# MMVP's texts as its script has them (the anchor, written out here: CI has no copy of MMVP)
MMVP_SYSTEM = (
    "You are a helpful and precise assistant for checking the quality of the answer. Please answer in only yes or no."
)


def test_the_grading_prompt_and_request_are_mmvps():
    prompt = R.grading_prompt("Is the door open? (a) Open (b) Closed", "(a)", "(b) Closed")
    assert prompt == (
        "Given the following question Is the door open? (a) Open (b) Closed, the correct answer is (a). "
        "Does the following answer correctly answers the question, answer:(b) Closed?"
    )
    assert R.grading_prompt("Q", "(b)", None).endswith("answer:None?")  # a JSON null, formatted as MMVP's f-string does
    req = R.grading_request("gpt-4-0314", "Q", "(a)", "A")
    assert (req.system, req.model, req.params, req.images) == (MMVP_SYSTEM, "gpt-4-0314", {"temperature": 0.2}, ())
    assert req.prompt == R.grading_prompt("Q", "(a)", "A")
    assert R.MODEL == "gpt-4-0314" and R.grader_id().startswith("mmvp_gpt_grader#") and len(R.grader_id()) == 24


@pytest.mark.parametrize(
    "reply, read, right",
    [
        ("yes", "yes", True),
        ("Yes", "yes", True),
        ("YES", "yes", True),
        ("yEs", "yes", True),
        ("no", "no", False),
        ("No", "no", False),
        ("Yes.", R.UNDETERMINED, False),
        (" yes", R.UNDETERMINED, False),
        ("yes ", R.UNDETERMINED, False),
        ("Yes, it does.", R.UNDETERMINED, False),
        ("", R.UNDETERMINED, False),
        ("Yes\n\n", R.UNDETERMINED, False),
        # `$` also matches before a final newline, so the regex takes "Yes\n"; lower-cased it is "yes\n", not "yes"
        ("Yes\n", "yes\n", False),
    ],
)
def test_the_reply_is_read_as_mmvps_regex_reads_it(reply, read, right):
    assert R.read_grade(reply) == read
    assert R.graded_right(reply) is right


@given(hs.text(max_size=8))
def test_right_exactly_when_the_reply_lower_cased_is_yes(reply):
    assert R.graded_right(reply) is (reply.lower() == "yes")


def test_pairs_are_consecutive_answers_and_an_odd_last_one_is_in_none():
    assert R.pair_accuracy([True, True, True, False, False, False, True]) == (1, 3)
    assert R.pair_accuracy([True]) == (0, 0)
    assert R.pair_accuracy([]) == (0, 0)


@given(hs.lists(hs.booleans(), max_size=40))
def test_pair_accuracy_counts_pairs_of_consecutive_answers(grades):
    right, pairs = R.pair_accuracy(grades)
    assert pairs == len(grades) // 2
    assert right == sum(a and b for a, b in zip(grades[0::2], grades[1::2], strict=False))


def test_grading_fields_of_mmvp_rows_and_vhmine_items():
    row = BenchItem(
        "mmvp:1",
        "MMVP",
        "OEQ",
        "Is the door open or closed? (a) Open (b) Closed",
        ("Open",),
        meta={"source": "mmvp", "correct_answer": "(a)"},
    )
    assert R.grading_fields(row) == ("Is the door open or closed? (a) Open (b) Closed", "(a)")
    yes = BenchItem("y1", "color", "YNQ", "Is the car red?", ("Yes",), True)
    no = BenchItem("y2", "color", "YNQ", "Is the car red?", ("No",), False)
    assert R.grading_fields(yes) == ("Is the car red? (a) Yes (b) No", "(a)")
    assert R.grading_fields(no) == ("Is the car red? (a) Yes (b) No", "(b)")
    oeq = BenchItem("o1", "counting", "OEQ", "How many cats?", ("4", "5"))
    assert R.grading_fields(oeq) == ("How many cats?", "4 or 5")
