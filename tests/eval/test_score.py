"""eval.score: the labels scorer uses the verdict that counts (workers' majority, else the automatic one)."""

from __future__ import annotations

import json

from helpers import answer_details, make_ready_store

from vhmine import curate as C


def test_eval_labels_scorer_uses_the_verdict_that_counts(tmp_path):
    from vhmine import formats as F
    from vhmine.eval.job import EvalOptions, evaluate
    from vhmine.export.job import ExportOptions, export_benchmark

    store = make_ready_store(tmp_path)
    export_benchmark(store, ExportOptions(out=tmp_path / "b", format="hf"))
    bench = F.load(tmp_path / "b")
    oeq = sorted(it.id for it in bench if it.kind == "OEQ")
    C.add_worker(store, "bob")
    judge = "llm:some-judge judge_oeq@v1#00000000"
    C.work.add_response(store, oeq[0], "m", "p", "an answer", "hallucinated", judge)  # judged only: the judge counts
    r1 = C.work.add_response(store, oeq[1], "m", "p", "an answer", "hallucinated", judge)  # workers overturn the judge
    C.work.label_response(store, "alice", r1, "correct")
    C.work.label_response(store, "bob", r1, "correct")
    r2 = C.work.add_response(store, oeq[2], "m", "p", "an answer", "correct", judge)  # tied workers: no verdict
    C.work.label_response(store, "alice", r2, "correct")
    C.work.label_response(store, "bob", r2, "hallucinated")
    r3 = C.work.add_response(store, oeq[3], "m", "p", "other words", "correct", judge)  # another answer: does not apply
    C.work.label_response(store, "alice", r3, "correct")
    store.close()
    preds = tmp_path / "m.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": it.id, "answer": "Yes" if it.kind == "YNQ" else "an answer"}) + "\n" for it in bench)
    )
    evaluate(
        EvalOptions(
            bench=tmp_path / "b",
            out=tmp_path / "ev",
            predictions=[("m", preds)],
            oeq="labels",
            db=str(tmp_path / "store.db"),
        )
    )
    read_as = {i: d["read_as"] for i, d in answer_details(tmp_path / "ev", "m").items()}
    assert [read_as[i] for i in oeq] == ["wrong", "right", "unjudged", "unjudged"]
