"""curate.responses: workers' labels of model answers and the verdict that counts."""

from __future__ import annotations

from vhmine import curate as C


def test_majority_verdict_ties_give_no_verdict():
    assert C.majority_verdict(["correct", "hallucinated", "correct"]) == "correct"
    assert C.majority_verdict(["hallucinated"]) == "hallucinated"
    assert C.majority_verdict(["correct", "hallucinated"]) is None and C.majority_verdict([]) is None
    assert C.decide_verdict("hallucinated", "rule:vhtest", []) == C.ResponseVerdict("hallucinated", "rule:vhtest")
    assert C.decide_verdict("hallucinated", "rule:vhtest", ["correct"]) == C.ResponseVerdict("correct", "workers", 1)
    assert C.decide_verdict("correct", "rule:vhtest", ["correct", "hallucinated"]).verdict is None
