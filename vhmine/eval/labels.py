"""eval's `labels` scorer: the curation store's verdicts on a model's open answers (vhmine eval --oeq labels).

Reads the store's `responses` and workers' labels through vhmine.curate (the verdict that counts:
curate.work.response_verdicts); writes nothing. A verdict judges one answer text, so only a response that says the same
as the answer being scored speaks for it.
"""

from __future__ import annotations

# a store verdict as eval scores it: "no answer" (the model did not answer: "I cannot tell from this image.") is not
# correct, as VHTest counts a refusal as a miss; it is counted apart (score: read_as "no answer")
RIGHT = {"correct": True, "hallucinated": False, "no answer": False}


def store_verdicts(
    db: str | None, model: str, answers: dict[str, str], workers_only: bool = False
) -> dict[str, str | None]:
    """instance id -> the store's verdict on `model`'s response that says the same as `answers[id]` ("correct",
    "hallucinated", "no answer"; None: none that counts).

    The verdict that counts (curate.work.response_verdicts): the workers' majority where they labelled the
    response, else probe's rule or judge; tied workers: None. `workers_only`: the workers' majority alone
    (responses no worker labelled are left out). A verdict judges one answer text, so a response with
    other words (another prompt, another endpoint) does not score this answer; two matching responses
    with different verdicts give None.
    """
    from vhmine import curate
    from vhmine.store import open_store

    with open_store(db, create=False) as store:
        rows = curate.stages.responses_saying(store, model, answers)
        counts = curate.work.response_verdicts(store, [rid for rid, _ in rows])
    found: dict[str, set] = {}
    for rid, iid in rows:
        if not workers_only or counts[rid].by_workers:
            found.setdefault(iid, set()).add(counts[rid].verdict)
    return {iid: v.pop() if len(v) == 1 else None for iid, v in found.items()}


def store_labels(
    db: str | None, model: str, answers: dict[str, str], workers_only: bool = False
) -> dict[str, bool | None]:
    """instance id -> right (True), wrong (False) or no verdict (None): store_verdicts as eval scores them."""
    return {iid: RIGHT.get(v) for iid, v in store_verdicts(db, model, answers, workers_only).items()}
