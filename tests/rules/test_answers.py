"""eval.answers: the yes/no rules. `--rule vhtest` is VHTest's own classify_response, and the curation reads a worker's
yes/no answer as eval reads a model's. `--rule vlmevalkit` is VLMEvalKit's own reading (its verified readings
written out: CI has no VLMEvalKit)."""

from __future__ import annotations

import csv
import json

import pytest
from helpers import TRICKY, classify_response, write_tiny_bench

from vhmine.bench import BenchItem, Benchmark
from vhmine.errors import FormError
from vhmine.eval.job import EvalOptions, evaluate
from vhmine.rules import answers as A
from vhmine.rules import modes as M


def test_vhtest_rule_is_vhtests_classify_response():
    as_vhtest = {"y": True, "n": False, "wrong_format": None}
    for text in TRICKY:
        assert A.parse_yes_no(text, "vhtest") is as_vhtest[classify_response(text.strip())], text
    assert [A.parse_yes_no(t) for t in ("Yesterday there was a cat.", "Nope", "Not sure", "Maybe")] == [
        True,
        False,
        False,
        None,
    ]
    # the first-word reader stays, under its own name
    assert [A.parse_yes_no(t, "firstword") for t in ("Yesterday", "Nope", "Yes?", "No, two.")] == [
        None,
        None,
        True,
        False,
    ]
    assert A.rule_names() == ("vhtest", "firstword", "pope", "strict", "vlmevalkit")


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


# --- `--rule vlmevalkit`: `--rule vlmevalkit` (vhmine.rules.answers, reading through formats.harness_rules) is
# VLMEvalKit's own yes/no reading: YOrN_Extraction after process_punctuation, on str() of each cell its result-file
# loading gives. The expected readings are those verified against VLMEvalKit's code (vlmeval/dataset/utils/yorn.py,
# smp/misc.py, smp/file.py at open-compass/VLMEvalKit e8e78f05): CI has no VLMEvalKit, so they are written out here.

# answer -> VLMEvalKit's reading (True "Yes", False "No", None "Unknown"), and VHTest's where it differs
VERIFIED = {
    "Not sure": None,
    "Nope": None,
    "Yesterday": None,
    "I think yes": True,
    "No, but yes": None,
    "None": None,
    "Yes": True,
    "No.": False,
    "yes!": True,
    "YES": True,
    "no": False,
    "": None,
    "nan": None,
    "Yes,no": None,
    "Yes, no": None,
    "No,there is none, sorry": None,
    "Yes,it costs 1,000": None,
    "**Yes**": None,
    "Answer: Yes": True,
    "Answer:Yes": None,
    "'yes'": None,
    "Yes。": None,
    "Yes...": True,
    "no.5": None,
    "Yes/No": None,
    "yes\nno": None,
    "Yes" + " ." * 40 + " no.": True,
    "." * 40 + " no.": None,
    'The answer is "no".': False,
    "Yes (definitely)": True,
    "Yes-ish": True,
    "no_entry": False,
    "no!!!": False,
    "YES.\n\nThe image shows a dog.": True,
    "No\xa0.": False,
    "NO, it is not.": False,
    "Yes; no.": None,
    "N/A": None,
    "NA": None,
    "null": None,
}


@pytest.mark.parametrize("answer, reading", VERIFIED.items())
def test_vlmevalkit_rule_reads_as_vlmevalkit(answer, reading):
    assert A.parse_yes_no(answer, "vlmevalkit") is reading


def test_the_two_rules_differ_where_vlmevalkit_reads_whole_words():
    differ = ["Not sure", "Nope", "Yesterday", "I think yes", "No, but yes", "None"]
    assert [A.parse_yes_no(a, "vhtest") for a in differ] == [False, False, True, None, False, False]
    assert [A.parse_yes_no(a, "vlmevalkit") for a in differ] == [None, None, None, True, None, None]


def test_eval_rule_vlmevalkit_on_a_vlmevalkit_result_file(tmp_path):
    """A VLMEvalKit csv result (dumped QUOTE_ALL, as its `dump` writes): cells it would load as NaN ("None", "N/A",
    "") read as its 'nan' (Unknown); VHTest's rule reads the cell as written ("None" starts with "no")."""
    import pandas as pd

    bench = write_tiny_bench(tmp_path)
    data = pd.read_csv(bench / "tiny_YNQ.tsv", sep="\t").drop(columns=["image"])
    preds = {"y1": "I think yes", "y2": "None", "y3": "N/A", "y4": "Nope"}  # truths: yes, no, yes, no
    data["prediction"] = [preds[i] for i in data["vhmine_id"]]
    f = tmp_path / "M_tiny_YNQ.csv"
    data.to_csv(f, index=False, quoting=csv.QUOTE_ALL)
    got = {}
    for rule in ("vhtest", "vlmevalkit"):
        res = evaluate(EvalOptions(bench=bench, out=tmp_path / rule, predictions=[("m", f)], rule=rule, partial=True))
        assert res.report["rule"] == rule
        read = {
            d["id"]: d["read_as"]
            for d in map(json.loads, (tmp_path / rule / "answers-m.jsonl").read_text().splitlines())
            if d["kind"] == "YNQ"
        }
        got[rule] = (read, res.report["models"]["m"]["metrics"]["overall"]["accuracy"])
    assert got["vhtest"] == ({"y1": "unreadable", "y2": "no", "y3": "unreadable", "y4": "no"}, 2 / 4)
    assert got["vlmevalkit"] == ({"y1": "yes", "y2": "unreadable", "y3": "unreadable", "y4": "unreadable"}, 1 / 4)
