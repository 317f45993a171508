"""eval.answers: the yes/no rules. `--rule vhtest` is VHTest's own classify_response, and the curation reads a worker's
yes/no answer as eval reads a model's."""

from __future__ import annotations

from vhmine import modes as M
from vhmine.bench import BenchItem, Benchmark
from vhmine.errors import FormError
from vhmine.eval import answers as A

from helpers import TRICKY, classify_response


def test_vhtest_rule_is_vhtests_classify_response():
    as_vhtest = {"y": True, "n": False, "wrong_format": None}
    for text in TRICKY:
        assert A.parse_yes_no(text, "vhtest") is as_vhtest[classify_response(text.strip())], text
    assert [A.parse_yes_no(t) for t in ("Yesterday there was a cat.", "Nope", "Not sure", "Maybe")] == [True, False, False, None]
    # the first-word reader stays, under its own name
    assert [A.parse_yes_no(t, "firstword") for t in ("Yesterday", "Nope", "Yes?", "No, two.")] == [None, None, True, False]
    assert A.rule_names() == ("vhtest", "firstword", "pope", "strict")


def _eval_reading(text, truth):
    from vhmine.eval.job import ModelAnswers, score

    bench = Benchmark("one", [BenchItem("q", "color", "YNQ", "Is the cup red?", (), truth)])
    _, details = score(bench, ModelAnswers("m", {"q": text}, "file"), A.DEFAULT_RULE, {}, "match")
    return details[0]["read_as"]


def test_curation_and_eval_read_a_yes_no_answer_alike():
    for text in TRICKY:
        assert M.yes_no_of(text) is A.parse_yes_no(text, A.DEFAULT_RULE), text
        for truth in (True, False):
            try:  # what the curation does with a worker's reference answer to a yes/no question
                M.check_ynq(truth, [text], "image A")
                refused = False
            except FormError:
                refused = True
            # refused exactly when eval, asked the same question, would read the answer as the opposite
            assert refused == (_eval_reading(text, truth) == ("no" if truth else "yes")), (text, truth)
