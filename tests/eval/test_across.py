"""vhmine.eval.across: how many models fail each item, whether failures transfer between models, and the items
that fool every model; an item whose request failed for a model is not scored, so it is neither a failure nor
a success of that model."""

from vhmine.eval.across import across_models, markdown_lines


def _d(iid, mode, correct, group=None):
    return {"id": iid, "mode": mode, "correct": correct, "group_id": group}


def test_failures_across_models():
    details = {
        "a": [_d("1", "m1", False), _d("2", "m1", False), _d("3", "m2", False), _d("4", "m2", True)],
        "b": [_d("1", "m1", False), _d("2", "m1", None), _d("3", "m2", True), _d("4", "m2", False)],
        "c": [_d("1", "m1", False), _d("2", "m1", False), _d("3", "m2", False), _d("4", "m2", True)],
    }
    s = across_models(details, ["m1", "m2"])
    assert s["items"] == {
        "1": {"failed_by": 3, "scored_by": 3},
        "2": {"failed_by": 2, "scored_by": 2},
        "3": {"failed_by": 2, "scored_by": 3},
        "4": {"failed_by": 1, "scored_by": 3},
    }
    # a failed 1, 2, 3; b answered 1 and 3 of them and failed 1: 1/2 (item 2, unanswered by b, does not count)
    assert s["transfer"]["a"]["b"] == {"share": 0.5, "both": 1, "of": 2}
    assert s["transfer"]["a"]["c"] == {"share": 1.0, "both": 3, "of": 3}
    assert s["transfer"]["b"]["a"] == {"share": 0.5, "both": 1, "of": 2}  # b failed 1 and 4; a failed 1
    assert s["fool_all"] == {"m1": ["1"], "m2": []}  # item 2 was not answered by b: it does not fool "every" model
    # failures first: by every model, then most (2 of 2 before 2 of 3), then fewest
    assert s["order"] == ["1", "2", "3", "4"]
    md = "\n".join(markdown_lines(s))
    assert "| a | - | 50 | 100 |" in md and "Items every model got wrong: m1 1, m2 0" in md
    assert markdown_lines(across_models({"a": details["a"]}, ["m1", "m2"])) == []
