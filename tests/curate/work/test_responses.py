"""curate.responses: workers' labels of model answers and the verdict that counts."""

from __future__ import annotations

from vhmine import curate as C


def test_majority_verdict_ties_give_no_verdict():
    assert C.work.majority_verdict(["correct", "hallucinated", "correct"]) == "correct"
    assert C.work.majority_verdict(["hallucinated"]) == "hallucinated"
    assert C.work.majority_verdict(["correct", "hallucinated"]) is None and C.work.majority_verdict([]) is None
    assert C.work.decide_verdict("hallucinated", "rule:vhtest", []) == C.work.ResponseVerdict(
        "hallucinated", "rule:vhtest"
    )
    assert C.work.decide_verdict("hallucinated", "rule:vhtest", ["correct"]) == C.work.ResponseVerdict(
        "correct", "workers", 1
    )
    assert C.work.decide_verdict("correct", "rule:vhtest", ["correct", "hallucinated"]).verdict is None
