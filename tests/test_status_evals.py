"""`vhmine status` lists the newest evals; where there are more than it shows, it says how many it left out and
where all of them are (issue 43: it listed the last 3 without saying so). --json lists every one."""

from __future__ import annotations

from vhmine.status import EVALS_SHOWN, EvalInfo, Status


def _status(n: int) -> Status:
    evals = [EvalInfo(f"evals/e{k}", "bench", "", 10, {"m": {"accuracy": 0.5}}, float(k)) for k in range(n)]
    return Status("/w", [], [], None, [], evals, next_step="vhmine eval")


def test_a_cut_list_of_evals_says_so_and_json_has_them_all():
    many = _status(EVALS_SHOWN + 2)
    text = many.text()
    assert f"evals: the last {EVALS_SHOWN} of {EVALS_SHOWN + 2} (`vhmine status --json` lists all):" in text, text
    assert "evals/e0/report.md" not in text and f"evals/e{EVALS_SHOWN + 1}/report.md" in text
    assert len(many.record()["evals"]) == EVALS_SHOWN + 2


def test_a_whole_list_of_evals_reads_as_before():
    text = _status(EVALS_SHOWN).text()
    assert "\nevals:\n" in text and "the last" not in text, text
    assert "evals: none" in _status(0).text()
